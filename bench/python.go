package main

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// pyExec is the Python program the python step drives.
//
//go:embed pyexec.py
var pyExec string

// pythonExec measures the Python SDK's exec of `true` (sdk/python, timed
// inside the Python process around client.exec) beside the Go SDK's, in
// one run, alternating so that drift hits both alike.
func (b *bench) pythonExec() error {
	name := "python"
	if _, err := b.d.c.CreateSandbox(b.ctx, api.CreateSandboxRequest{Name: name, Image: "busybox", Memory: "256M"}); err != nil {
		return err
	}
	defer b.d.c.RemoveSandbox(b.ctx, name, true)

	sdk, err := filepath.Abs(b.pythonSDK)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(sdk, "den", "__init__.py")); err != nil {
		return fmt.Errorf("no Python SDK at %s (-python-sdk): %w", sdk, err)
	}
	cmd := exec.Command(b.python, "-c", pyExec, filepath.Join(b.work, "den.sock"), name)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk, "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", b.python, err)
	}
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	out := bufio.NewReader(outPipe)

	viaPython := func() (time.Duration, error) {
		if _, err := io.WriteString(in, "exec\n"); err != nil {
			return 0, err
		}
		line, err := out.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("reading from the Python process: %w", err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("the Python SDK: %s", strings.TrimSpace(line))
		}
		return time.Duration(ns), nil
	}
	viaGo := func() (time.Duration, error) {
		return timed(func() error {
			_, err := b.d.c.Exec(b.ctx, name, api.ExecRequest{Argv: []string{"true"}}, client.ExecIO{})
			return err
		})
	}
	// Warm both (imports, the first connection), then alternate.
	for range 3 {
		for _, f := range []func() (time.Duration, error){viaPython, viaGo} {
			if _, err := f(); err != nil {
				return err
			}
		}
	}
	var py, gosdk samples
	for range b.n {
		for _, p := range []struct {
			f    func() (time.Duration, error)
			into *samples
		}{{viaPython, &py}, {viaGo, &gosdk}} {
			d, err := p.f()
			if err != nil {
				return err
			}
			*p.into = append(*p.into, d)
		}
	}
	b.add(section{title: "Python SDK: exec of `true` over the unix socket", rows: []row{
		{op: "Python SDK exec (raw: Go SDK exec)", den: py, raw: gosdk, goal: "≤ 1.3× Go SDK", note: ratio(py, gosdk)},
	}})
	return nil
}
