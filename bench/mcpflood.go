package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/internal/mcpserver/mcptest"
)

// floodCalls is how many initialize calls a flood makes.
const floodCalls = 1000

// mcpFlood measures dend's memory under a flood of MCP initialize calls
// on /mcp (issue 26): with one owner:read token on the bench dend, whose
// limits refuse most of them; then on a dend whose limits are raised
// past the flood, so every call opens a session and what one session
// holds shows.
func (b *bench) mcpFlood() error {
	s := section{title: fmt.Sprintf("MCP sessions: dend's RSS under %d initialize calls on /mcp", floodCalls)}
	line, err := flood(b.d, "one owner:read token, default limits")
	if err != nil {
		return err
	}
	s.lines = append(s.lines, line...)

	d, err := startDendWith(b.bin, filepath.Join(b.work, "mcpflood"), b.mcpSubnet, nil,
		"--mcp-sessions-per-token", fmt.Sprint(floodCalls), "--mcp-sessions", fmt.Sprint(floodCalls))
	if err != nil {
		return fmt.Errorf("starting a dend with raised MCP limits: %w", err)
	}
	defer d.close()
	if line, err = flood(d, fmt.Sprintf("one owner:read token, --mcp-sessions-per-token %d --mcp-sessions %d", floodCalls, floodCalls)); err != nil {
		return err
	}
	s.lines = append(s.lines, line...)
	b.add(s)
	return nil
}

// flood makes floodCalls initialize calls to d's /mcp with a new
// owner:read token, and reports d's RSS before, after, once the sessions
// it opened have been ended with DELETE, and after a second flood (which
// reuses what the first one's sessions freed).
func flood(d *benchDend, what string) ([]string, error) {
	tok, err := d.c.CreateToken(context.Background(), api.CreateTokenRequest{Name: "flood", Scope: "owner:read"})
	if err != nil {
		return nil, fmt.Errorf("creating a token: %w", err)
	}
	url := "http://" + d.listen + "/mcp"
	rss := func() int64 { return statusKB(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid), "VmRSS:") }
	// One session opened and ended first: what is measured is the flood,
	// not the door's first use.
	code, id, body, err := mcptest.Call("POST", url, tok.Token, "", mcptest.Initialize)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("initialize: %d %s %v", code, body, err)
	}
	if err := endSessions(url, tok.Token, []string{id}); err != nil {
		return nil, err
	}
	before := rss()
	statuses, opened, took, err := floodOnce(url, tok.Token)
	if err != nil {
		return nil, err
	}
	flooded := rss()
	if err := endSessions(url, tok.Token, opened); err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Second) // the Go runtime hands freed memory back gradually
	ended := rss()
	_, again, _, err := floodOnce(url, tok.Token)
	if err != nil {
		return nil, err
	}
	second := rss()
	if err := endSessions(url, tok.Token, again); err != nil {
		return nil, err
	}

	var codes []string
	for c, n := range statuses {
		codes = append(codes, fmt.Sprintf("%d× %d", n, c))
	}
	sort.Strings(codes)
	// Per session only when sessions are most of what the flood left:
	// 16 sessions are lost in what a thousand refused requests stir up.
	perSession := ""
	if len(opened) >= floodCalls/2 {
		perSession = fmt.Sprintf(", %.1f KiB per session opened", float64(flooded-before)/float64(len(opened))/1024)
	}
	return []string{
		fmt.Sprintf("%s: %s in %s; %d sessions opened", what, strings.Join(codes, ", "), took.Round(time.Millisecond), len(opened)),
		fmt.Sprintf("  dend RSS unflooded %s; after the flood %s (+%s%s); 5 s after its sessions were ended (DELETE) %s; after a second flood %s",
			mib(before), mib(flooded), mib(flooded-before), perSession, mib(ended), mib(second)),
	}, nil
}

// floodOnce makes floodCalls initialize calls as token, 8 at a time, and
// returns how many got each status, the sessions opened and how long
// it took.
func floodOnce(url, token string) (map[int]int, []string, time.Duration, error) {
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		opened   []string
		failed   error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range floodCalls / 8 {
				code, id, _, err := mcptest.Call("POST", url, token, "", mcptest.Initialize)
				mu.Lock()
				statuses[code]++
				if code == http.StatusOK && id != "" {
					opened = append(opened, id)
				}
				if err != nil && failed == nil {
					failed = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return statuses, opened, time.Since(start), failed
}

// endSessions ends sessions with DELETE.
func endSessions(url, token string, ids []string) error {
	for _, id := range ids {
		code, _, body, err := mcptest.Call("DELETE", url, token, id, "")
		if err != nil {
			return err
		}
		if code != http.StatusNoContent {
			return fmt.Errorf("DELETE of MCP session %s: %d %s", id, code, body)
		}
	}
	return nil
}
