// Package cli is what den's command groups share: one invocation's
// streams, global flags and client (App), the errors that decide den's
// exit status, the argument checks, and the tables, JSON and progress
// bars den prints.
//
// It defines no command of its own and never imports a command group:
// the groups (cmd/den/internal/...) import it, and cmd/den puts them
// together under the root command.
package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/den-dev/den/client"
)

// App is one invocation of den: its streams, global flags and client.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string

	// Version is den's release as stamped at build time ("" when it
	// was not: ClientVersion then finds it).
	Version string

	// global flags
	Socket, Host, Token string
	JSON, Debug         bool

	// skew is dend's release as its answers named it (version.go).
	skew skew
}

// Errors that decide the exit status.
type (
	// UsageError is a mistake in the command line: exit status 2.
	UsageError struct{ msg, hint string }
	// ExitError ends den with a status and no message (the command run
	// by `den exec` already said what happened).
	ExitError struct{ Code int }
	// hintedError is an error of den's own with a hint for the user.
	hintedError struct {
		err  error
		hint string
	}
)

func (e *UsageError) Error() string  { return e.msg }
func (e *ExitError) Error() string   { return fmt.Sprintf("exit status %d", e.Code) }
func (e *hintedError) Error() string { return e.err.Error() }
func (e *hintedError) Unwrap() error { return e.err }

// Usagef is a mistake in the command line, with a hint for the user.
func Usagef(hint, format string, a ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, a...), hint: hint}
}

// WithHint gives err a hint for the user.
func WithHint(err error, hint string) error { return &hintedError{err: err, hint: hint} }

// HintOf returns the hint for err: den's own, or the one dend sent.
func HintOf(err error) string {
	var u *UsageError
	if errors.As(err, &u) {
		return u.hint
	}
	var h *hintedError
	if errors.As(err, &h) {
		return h.hint
	}
	return client.Hint(err)
}

// Client returns a client configured by the global flags, then the
// environment: --host, --socket, DEN_HOST, DEN_SOCKET, the default socket.
func (a *App) Client() (*client.Client, error) {
	opts := []client.Option{
		client.WithUserAgent("den/" + a.ClientVersion()),
		client.WithServerVersion(a.HeardServer),
		// A change whose connection drops is asked after until dend
		// answers; the user hears that it happened and how it ended
		// (its failure, as den's error).
		client.WithReconnect(client.DefaultReconnect, func(msg string) { fmt.Fprintf(a.Stderr, "den: %s\n", msg) }),
	}
	if a.Debug {
		log := slog.New(slog.NewTextHandler(a.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts = append(opts, client.WithLogger(log))
	}
	token := a.Token
	if token == "" {
		token = a.Getenv("DEN_TOKEN")
	}
	switch {
	case a.Host != "":
		opts = append(opts, client.WithHost(a.Host, token))
	case a.Socket != "":
		opts = append(opts, client.WithSocket(a.Socket))
	case a.Getenv("DEN_HOST") != "":
		opts = append(opts, client.WithHost(a.Getenv("DEN_HOST"), token))
	case a.Getenv("DEN_SOCKET") != "":
		opts = append(opts, client.WithSocket(a.Getenv("DEN_SOCKET")))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, WithHint(err, "check --host/DEN_HOST")
	}
	return c, nil
}

// EachDone is Each for verbs that print nothing of their own: each name
// done is printed on its own line, unless --json.
func (a *App) EachDone(names []string, fn func(string) error) error {
	return a.Each(names, func(n string) error {
		if err := fn(n); err != nil {
			return err
		}
		if !a.JSON {
			fmt.Fprintln(a.Stdout, n)
		}
		return nil
	})
}

// Each runs fn for every name, going on after a failure. With one name
// its error is returned as it is; with several, each failure is reported
// as it happens and the result only says how many failed.
func (a *App) Each(names []string, fn func(string) error) error {
	if len(names) == 1 {
		return fn(names[0])
	}
	failed := 0
	for _, n := range names {
		if err := fn(n); err != nil {
			failed++
			fmt.Fprintf(a.Stderr, "den: %s: %s\n", n, err)
			if hint := HintOf(err); hint != "" {
				fmt.Fprintf(a.Stderr, "hint: %s\n", hint)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d failed", failed, len(names))
	}
	return nil
}

// Args returns a validator for exactly the named positional arguments.
func Args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return Usagef("usage: "+cmd.UseLine(), "missing %s", strings.Join(names[len(args):], " and "))
		}
		if len(args) > len(names) {
			return Usagef("usage: "+cmd.UseLine(), "unexpected argument %q", args[len(names)])
		}
		return nil
	}
}

// AtLeast returns a validator for at least the named positional arguments
// (more are allowed).
func AtLeast(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < len(names) {
			return Usagef("usage: "+cmd.UseLine(), "missing %s", strings.Join(names[len(args):], " and "))
		}
		return nil
	}
}

// Subcommands is the Args of a command group: it names what is missing or
// unknown.
func Subcommands(group, list string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		hint := "see `den " + group + " --help`"
		if len(args) > 0 {
			return Usagef(hint, "unknown %s command %q", group, args[0])
		}
		return Usagef(hint, "missing the %s command (%s)", group, list)
	}
}

// ParseKeyValues reads K=V pairs. When getenv is set, a bare K takes its
// value from it (like docker's -e K).
func ParseKeyValues(flag string, pairs []string, getenv func(string) string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if k == "" || !ok && getenv == nil {
			return nil, Usagef("write it as "+flag+" KEY=VALUE", "invalid %s %q", flag, p)
		}
		if !ok {
			v = getenv(k)
		}
		m[k] = v
	}
	return m, nil
}
