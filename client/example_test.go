package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/den-dev/den/api"
	"github.com/den-dev/den/client"
)

// Create a sandbox, run a command in it attached, and read a file back.
func Example() {
	ctx := context.Background()
	c, err := client.FromEnv() // DEN_SOCKET, or DEN_HOST + DEN_TOKEN
	if err != nil {
		log.Fatal(err)
	}

	if _, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Name: "web", Image: "debian"}); err != nil && !client.IsConflict(err) {
		log.Fatalf("%v (hint: %s)", err, client.Hint(err))
	}

	run, err := c.Exec(ctx, "web", api.ExecRequest{Argv: []string{"sh", "-c", "echo hi > /tmp/hi; uname -a"}},
		client.ExecIO{Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	if run.ExitCode != nil {
		fmt.Println("exit code:", *run.ExitCode)
	}

	f, err := c.ReadFile(ctx, "web", "/tmp/hi")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	_, _ = os.Stdout.ReadFrom(f)
}

// Build a built-in image, printing its progress.
func ExampleClient_BuildImage() {
	c, err := client.New(client.WithSocket(client.DefaultSocket))
	if err != nil {
		log.Fatal(err)
	}
	img, err := c.BuildImage(context.Background(), api.BuildImageRequest{Name: "debian"}, func(p api.Progress) {
		fmt.Printf("%s: %s %d/%d\n", p.Phase, p.Message, p.Current, p.Total)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("built", img.Name)
}

// Checkpoint a sandbox before a risky step and rewind it if the step
// fails; fork copies of it to try other things side by side.
func ExampleClient_Restore() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Checkpoint(ctx, "web", client.CheckpointOptions{Name: "before-upgrade"}); err != nil {
		log.Fatalf("%v (hint: %s)", err, client.Hint(err))
	}
	run, err := c.Exec(ctx, "web", api.ExecRequest{Argv: []string{"sh", "-c", "apt-get -y upgrade"}}, client.ExecIO{})
	if err != nil {
		log.Fatal(err)
	}
	if run.ExitCode == nil || *run.ExitCode != 0 {
		if _, err := c.Restore(ctx, "web", "before-upgrade"); err != nil {
			log.Fatal(err)
		}
	}
	kids, err := c.Fork(ctx, "web", client.ForkOptions{Name: "try", From: "before-upgrade", Count: 3})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(kids), "copies, the first is", kids[0].Name)
	// Let an idle sandbox hibernate after 15 minutes instead of dend's default.
	if _, err := c.SetPolicy(ctx, "web", api.Policy{HibernateAfter: new("15m")}); err != nil {
		log.Fatal(err)
	}
}
