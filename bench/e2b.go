package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// e2bDoor measures the official e2b SDK (integration/js, run by node)
// against dend's E2B door: Sandbox.create → commands.run('true') done,
// and the commands.run round trip; beside den's own Go SDK doing the same
// on the same image in the same run. E2B's run is `/bin/bash -l -c true`
// as the user user, so den's own does exactly that too.
func (b *bench) e2bDoor() error {
	js, err := filepath.Abs(filepath.Join(filepath.Dir(b.bin), "integration", "js"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(js, "node_modules", "e2b")); err != nil {
		return fmt.Errorf("the e2b SDK is not installed: run `npm ci` in %s (make test does)", js)
	}
	if _, err := b.d.c.BuildImage(b.ctx, api.BuildImageRequest{Name: "e2b-base"}, nil); err != nil {
		return fmt.Errorf("building e2b-base: %w", err)
	}
	tok, err := b.d.c.CreateToken(b.ctx, api.CreateTokenRequest{Name: "e2b-bench", Scope: "owner"})
	if err != nil {
		return err
	}
	host := "http://" + b.d.listen
	owner, err := client.New(client.WithHost(host, tok.Token))
	if err != nil {
		return err
	}

	// E2B, through the official SDK.
	cmd := exec.Command("node", "e2b_bench.mjs")
	cmd.Dir = js
	cmd.Env = append(os.Environ(), "E2B_API_URL="+host, "E2B_SANDBOX_URL="+host, "E2B_API_KEY="+tok.Token, "N="+strconv.Itoa(b.n))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node e2b_bench.mjs: %w\n%s", err, errb.String())
	}
	var viaE2B struct{ Create, Run []float64 }
	if err := json.Unmarshal(out.Bytes(), &viaE2B); err != nil {
		return fmt.Errorf("e2b_bench.mjs printed %q: %w", out.String(), err)
	}

	// den's own API, the same work: same image, command, user and token.
	argv := []string{"/bin/bash", "-l", "-c", "true"}
	run := func(name string) error {
		_, err := owner.Exec(b.ctx, name, api.ExecRequest{Argv: argv}, client.ExecIO{})
		return err
	}
	var create, rt samples
	for i := range b.n + 1 {
		name := "e2b-" + strconv.Itoa(i)
		d, err := timed(func() error {
			if _, err := owner.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "e2b-base"}); err != nil {
				return err
			}
			return run(name)
		})
		if err != nil {
			return err
		}
		if i > 0 { // the first warms up, as the SDK's does
			create = append(create, d)
		}
		if err := owner.RemoveSandbox(b.ctx, name, true); err != nil {
			return err
		}
	}
	if _, err := owner.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: "e2b-rt", Image: "e2b-base"}); err != nil {
		return err
	}
	defer owner.RemoveSandbox(b.ctx, "e2b-rt", true)
	if err := run("e2b-rt"); err != nil {
		return err
	}
	for range b.n * 5 {
		d, err := timed(func() error { return run("e2b-rt") })
		if err != nil {
			return err
		}
		rt = append(rt, d)
	}
	e2bCreate, e2bRun := millis(viaE2B.Create), millis(viaE2B.Run)
	b.add(section{title: "front doors: E2B SDK (e2b-base, `bash -l -c true` as user)", rows: []row{
		{op: "E2B Sandbox.create → commands.run done (raw: den Go SDK)", den: e2bCreate, raw: create, goal: "≤ 1.3× den", note: ratio(e2bCreate, create)},
		{op: "E2B commands.run round trip (raw: den Go SDK exec)", den: e2bRun, raw: rt, goal: "≤ 1.3× den", note: ratio(e2bRun, rt)},
	}})
	return nil
}

func millis(ms []float64) samples {
	out := make(samples, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m * float64(time.Millisecond))
	}
	return out
}
