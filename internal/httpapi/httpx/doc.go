// Package httpx is the plumbing every part of den's REST API shares: the
// one translation of an error to a status code and the JSON envelope of
// package api, strict JSON bodies, query parameters, and what the access
// layers learn of each request (Info: its principal, route, sandbox, and
// the port grant that let it in without a token).
//
// It serves no route and calls no service: the handlers live in
// internal/httpapi and its other subpackages, which all import this one.
// It never decides who may do what; it only carries what the access
// layers of internal/httpapi found.
package httpx
