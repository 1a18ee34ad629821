package runsc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/sandbox"
)

var _ sandbox.HostMemoryReader = (*Runtime)(nil)

// HostPSS is the host memory an instance holds, as the kernel shares it
// out: the proportional set size of every host process in its cgroup
// (runsc's sandbox and gofer, and the platform's stub processes), where a
// page mapped by n processes counts 1/n to each. Pages shared with other
// instances (the runsc binary's) count only in part, so the sum over
// instances is what they hold together.
func (r *Runtime) HostPSS(id string) (int64, error) {
	cg, err := r.hostCgroups(id)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(cg.file("memory", "cgroup.procs"))
	if err != nil {
		return 0, fmt.Errorf("listing the processes of %s: %w", id, err)
	}
	var total int64
	for _, f := range strings.Fields(string(b)) {
		pss, err := processPSS(f)
		if err != nil {
			continue // gone since the list was read
		}
		total += pss
	}
	return total, nil
}

// processPSS reads the Pss line of /proc/PID/smaps_rollup, in bytes.
func processPSS(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/smaps_rollup")
	if err != nil {
		return 0, err
	}
	return parsePSS(b)
}

func parsePSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Pss:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("reading Pss %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no Pss line")
}
