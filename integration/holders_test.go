package integration

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Every process descended from a command given secrets holds them,
// however it detached: its own session, a double fork, daemon(3)'s fork,
// setsid, fork and exit (reparented to den-init), nohup, `sh -c 'x &'`,
// and with a cleared environment and no file descriptors of its own.
// Each is marked in the process list, and hibernation and a checkpoint
// with memory are refused naming it.
func TestSecretHoldersDetached(t *testing.T) {
	d := startDend(t)
	ctx := ctxT(t, 5*time.Minute)
	if _, err := d.c.SetSecret(ctx, "API_TOKEN", []byte("held-"+rand.Text())); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "svc", Image: "busybox", Memory: "256M",
		Secrets: []api.SecretGrant{{Name: "API_TOKEN"}}}); err != nil {
		t.Fatal(err)
	}
	quiet := "</dev/null >/dev/null 2>&1"
	for i, tc := range []struct{ name, script string }{
		{"setsid", "setsid sleep %d " + quiet + " &"},
		{"double fork", "(sleep %d " + quiet + " &); true"},
		{"daemon", "(setsid sh -c 'sleep %d " + quiet + " & exit 0' " + quiet + " &); true"},
		{"nohup", "(trap '' HUP; exec sleep %d " + quiet + ") &"}, // the image has no nohup(1)
		{"sh -c", "sh -c 'sleep %d " + quiet + " &'"},
		{"cleared", "(setsid env -i sh -c 'exec 3>&- 4>&-; sleep %d " + quiet + " &' " + quiet + " &); true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := fmt.Sprintf("sleep %d", 7001+i)
			d.mustSh("svc", fmt.Sprintf(tc.script, 7001+i))
			var held api.Process
			waitFor(t, 10*time.Second, argv+" to start", func() bool {
				procs, err := d.c.Processes(ctx, "svc")
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range procs {
					if p.Command == argv {
						held = p
						return true
					}
				}
				return false
			})
			if !held.Secrets {
				t.Errorf("%+v is not marked as holding secrets", held)
			}
			want := fmt.Sprintf("pid %d `%s`", held.PID, held.Command)
			_, err := d.c.Hibernate(ctx, "svc")
			if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
				t.Errorf("hibernate: %+v, want a conflict naming %s", e, want)
			}
			_, err = d.c.Checkpoint(ctx, "svc", client.CheckpointOptions{Name: "mem"})
			if e := apiErr(t, err); e.Code != api.CodeConflict || !strings.Contains(e.Message, want) {
				t.Errorf("checkpoint: %+v, want a conflict naming %s", e, want)
			}
			d.mustSh("svc", fmt.Sprintf("kill %d", held.PID))
			waitFor(t, 10*time.Second, argv+" to end", func() bool {
				return !strings.Contains(d.mustSh("svc", "ps -o args"), argv)
			})
		})
	}
}
