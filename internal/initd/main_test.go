package initd

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary act as den-init's wrapper for a process
// given secrets (TestSecretExecMarks).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SecretExecArg {
		err := SecretExec(os.Args[2:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	os.Exit(m.Run())
}
