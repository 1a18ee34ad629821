package httpapi

import "github.com/den-dev/den/internal/httpapi/portproxy"

// Route is one method and path pattern the API serves, in the syntax of
// net/http.ServeMux: "/v1/sandboxes/{name}/start".
type Route struct {
	Method string
	Path   string
}

// route is a Route with its handler.
type route struct {
	method string
	path   string
	fn     handlerFunc
}

// routes is the one table of the API: New registers it, Routes reports it.
func (s *server) routes() []route {
	return append([]route{
		{"GET", "/v1/health", s.getHealth},
		{"GET", "/v1/openapi.yaml", s.getOpenAPI},
		{"GET", "/v1/requests/{key}", s.getRequest},
		{"GET", "/v1/events", s.streamEvents},
		{"GET", "/metrics", s.getMetrics},

		{"POST", "/v1/sandboxes", s.createSandbox},
		{"GET", "/v1/sandboxes", s.listSandboxes},
		{"GET", "/v1/sandboxes/{name}", s.getSandbox},
		{"DELETE", "/v1/sandboxes/{name}", s.removeSandbox},
		{"POST", "/v1/sandboxes/{name}/start", s.startSandbox},
		{"POST", "/v1/sandboxes/{name}/stop", s.stopSandbox},
		{"GET", "/v1/sandboxes/{name}/events", s.listEvents},
		{"GET", "/v1/sandboxes/{name}/metrics", s.sandboxMetrics},
		{"POST", "/v1/sandboxes/{name}/pause", s.pauseSandbox},
		{"POST", "/v1/sandboxes/{name}/resume", s.resumeSandbox},
		{"POST", "/v1/sandboxes/{name}/hibernate", s.hibernateSandbox},
		{"POST", "/v1/sandboxes/{name}/recover", s.recoverSandbox},
		{"POST", "/v1/sandboxes/{name}/move", s.fleetAPI.Move},
		{"POST", "/v1/sandboxes/{name}/adopt", s.fleetAPI.Adopt},
		{"PUT", "/v1/sandboxes/{name}/handover/{part}", s.fleetAPI.ReceiveAhead},
		{"GET", sshRelayRoute, s.relaySSH},
		{"PATCH", "/v1/sandboxes/{name}/policy", s.setPolicy},
		{"PUT", "/v1/sandboxes/{name}/network", s.setNetwork},
		{"PATCH", "/v1/sandboxes/{name}/limits", s.setLimits},
		{"PUT", "/v1/sandboxes/{name}/secrets", s.setSecrets},
		{"PUT", "/v1/sandboxes/{name}/setup", s.setSetup},
		{"POST", "/v1/sandboxes/{name}/rebase", s.rebaseSandbox},
		{"PUT", "/v1/sandboxes/{name}/harness", s.setHarness},
		{"GET", "/v1/sandboxes/{name}/harness", s.getHarness},
		{"DELETE", "/v1/sandboxes/{name}/harness", s.removeHarness},
		{"POST", "/v1/sandboxes/{name}/export", s.exportSandbox},
		{"POST", "/v1/sandboxes/import", s.importSandbox},
		{"PUT", "/v1/sandboxes/{name}/ports/{port}", s.ports.Expose},
		{"DELETE", "/v1/sandboxes/{name}/ports/{port}", s.ports.Unexpose},
		{"GET", portproxy.URLPattern, s.ports.URL},
		{"DELETE", portproxy.URLPattern, s.ports.RevokeURLs},

		{"GET", "/v1/sandboxes/{name}/peers", s.listPeers},
		{"POST", "/v1/sandboxes/{name}/peers", s.addPeer},
		{"POST", "/v1/sandboxes/{name}/peers/{peer}/refresh", s.refreshPeer},
		{"DELETE", "/v1/sandboxes/{name}/peers/{peer}", s.removePeer},

		{"GET", "/v1/sandboxes/{name}/services", s.listServices},
		{"POST", "/v1/sandboxes/{name}/services", s.addService},
		{"DELETE", "/v1/sandboxes/{name}/services/{svc}", s.removeService},
		{"POST", "/v1/sandboxes/{name}/services/{svc}/restart", s.restartService},

		{"POST", "/v1/sandboxes/{name}/checkpoints", s.createCheckpoint},
		{"GET", "/v1/sandboxes/{name}/checkpoints", s.listCheckpoints},
		{"GET", "/v1/sandboxes/{name}/checkpoints/{ckpt}", s.getCheckpoint},
		{"DELETE", "/v1/sandboxes/{name}/checkpoints/{ckpt}", s.removeCheckpoint},
		{"POST", "/v1/sandboxes/{name}/restore", s.restoreSandbox},
		{"POST", "/v1/sandboxes/{name}/fork", s.forkSandbox},

		{"POST", "/v1/sandboxes/{name}/exec", s.exec},
		{"GET", "/v1/sandboxes/{name}/exec/ws", s.execWebSocket},
		{"GET", "/v1/sandboxes/{name}/runs", s.listRuns},
		{"GET", "/v1/sandboxes/{name}/processes", s.listProcesses},
		{"GET", "/v1/sandboxes/{name}/runs/{run}", s.getRun},
		{"GET", "/v1/sandboxes/{name}/runs/{run}/logs", s.runLogs},
		{"POST", "/v1/sandboxes/{name}/runs/{run}/signal", s.signalRun},
		{"POST", "/v1/sandboxes/{name}/runs/{run}/stdin", s.runStdin},
		{"POST", "/v1/sandboxes/{name}/runs/{run}/resize", s.resizeRun},

		{"GET", "/v1/sandboxes/{name}/files/stat", s.statFile},
		{"GET", "/v1/sandboxes/{name}/files/list", s.listFiles},
		{"GET", "/v1/sandboxes/{name}/files/content", s.readFile},
		{"PUT", "/v1/sandboxes/{name}/files/content", s.writeFile},
		{"POST", "/v1/sandboxes/{name}/files/mkdir", s.mkdir},
		{"POST", "/v1/sandboxes/{name}/files/move", s.moveFile},
		{"DELETE", "/v1/sandboxes/{name}/files", s.removeFile},
		{"GET", "/v1/sandboxes/{name}/files/archive", s.readArchive},
		{"PUT", "/v1/sandboxes/{name}/files/archive", s.writeArchive},
		{"GET", "/v1/sandboxes/{name}/files/watch", s.watchFiles},

		{"GET", "/v1/images", s.listImages},
		{"GET", "/v1/images/{image}", s.getImage},
		{"POST", "/v1/images/build", s.buildImage},
		{"POST", "/v1/images/import", s.importImage},
		{"POST", "/v1/images/pull", s.pullImage},
		{"DELETE", "/v1/images/{image}", s.removeImage},
		{"PUT", "/v1/images/{image}/warm", s.setWarm},

		{"POST", "/v1/tokens", s.createToken},
		{"GET", "/v1/tokens", s.listTokens},
		{"DELETE", "/v1/tokens/{id}", s.revokeToken},
		{"POST", "/v1/ssh-keys", s.addSSHKey},
		{"GET", "/v1/ssh-keys", s.listSSHKeys},
		{"DELETE", "/v1/ssh-keys/{key}", s.removeSSHKey},
		{"GET", "/v1/audit", s.listAudit},
		{"PUT", "/v1/secrets/{name}", s.setSecret},
		{"GET", "/v1/secrets", s.listSecrets},
		{"DELETE", "/v1/secrets/{name}", s.removeSecret},

		{"GET", "/v1/nodes", s.fleetAPI.ListNodes},
		{"POST", "/v1/nodes/{node}/drain", s.fleetAPI.DrainNode},
		{"POST", "/v1/nodes/{node}/activate", s.fleetAPI.ActivateNode},
		{"DELETE", "/v1/nodes/{node}", s.fleetAPI.RemoveNode},

		{"GET", "/v1/owners", s.listOwners},
		{"GET", "/v1/owners/{owner}", s.getOwner},
		{"PATCH", "/v1/owners/{owner}", s.setOwner},
		{"DELETE", "/v1/owners/{owner}", s.resetOwner},

		{"POST", "/v1/admin/blobs/gc", s.fleetAPI.CollectBlobs},
	}, s.proxyRoutes()...)
}

// proxyRoutes is the proxy's row of the route table, once per method.
func (s *server) proxyRoutes() []route {
	out := make([]route, len(portproxy.Methods))
	for i, m := range portproxy.Methods {
		out[i] = route{m, portproxy.Pattern, s.ports.Serve}
	}
	return out
}

// Routes lists every route New serves, in the order of the table.
func Routes() []Route {
	table := (&server{}).routes()
	out := make([]Route, len(table))
	for i, rt := range table {
		out[i] = Route{Method: rt.method, Path: rt.path}
	}
	return out
}
