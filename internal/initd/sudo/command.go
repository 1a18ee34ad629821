package sudo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/den-dev/den/internal/guest"
)

// The sudo command: den-init's binary run as `sudo` (see Main). It
// takes the options agents and scripts use (-u, -E, --preserve-env=, -i,
// -s, -n, -H, -l, -v, -k, -V, VAR=value before the command) and asks
// den-init to run the command.

// securePath is the PATH commands get, as Debian's sudoers sets it.
const securePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// keptEnv are the variables a command keeps without -E.
var keptEnv = []string{"TERM", "COLORTERM", "COLORS", "DISPLAY", "XAUTHORITY", "TZ", "LANG", "LANGUAGE", "LS_COLORS"}

const sudoUsage = `usage: sudo [-EHiklnsVv] [-u user] [--preserve-env=list] [VAR=value] [command [arg ...]]
(den runs sudo through den-init: gVisor does not honour set-user-ID programs)
`

// sudoOptions is a parsed sudo command line.
type sudoOptions struct {
	user           string
	preserveEnv    bool
	preserve       []string
	login, shell   bool
	list, noop     bool
	version, help  bool
	assignments    []string
	command        []string
	background     bool
	unsupportedOpt string
}

// parseSudo reads sudo's command line (args without the program name).
func parseSudo(args []string) (sudoOptions, error) {
	var o sudoOptions
	i := 0
	value := func(opt string, rest string) (string, error) {
		if rest != "" {
			return rest, nil
		}
		if i+1 >= len(args) {
			return "", fmt.Errorf("option requires an argument -- '%s'", opt)
		}
		i++
		return args[i], nil
	}
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			break
		}
		if strings.HasPrefix(a, "--") {
			name, val, hasVal := strings.Cut(a[2:], "=")
			var err error
			switch name {
			case "user":
				if !hasVal {
					val, err = value(name, "")
				}
				o.user = val
			case "preserve-env":
				if hasVal {
					o.preserve = append(o.preserve, strings.Split(val, ",")...)
				} else {
					o.preserveEnv = true
				}
			case "login":
				o.login = true
			case "shell":
				o.shell = true
			case "list":
				o.list = true
			case "version":
				o.version = true
			case "help":
				o.help = true
			case "non-interactive", "set-home", "preserve-groups", "stdin", "askpass", "validate", "reset-timestamp", "remove-timestamp":
				if name == "validate" || name == "reset-timestamp" || name == "remove-timestamp" {
					o.noop = true
				}
			case "prompt", "close-from", "command-timeout", "chdir", "group", "host", "role", "type", "other-user":
				if !hasVal {
					_, err = value(name, "")
				}
				if name == "group" || name == "chdir" || name == "host" || name == "other-user" {
					o.unsupportedOpt = "--" + name
				}
			case "background":
				o.background = true
			default:
				return o, fmt.Errorf("unrecognized option '%s'", a)
			}
			if err != nil {
				return o, err
			}
			continue
		}
		for j := 1; j < len(a); j++ {
			c := a[j : j+1]
			rest := a[j+1:]
			switch c {
			case "n", "H", "S", "A", "P":
			case "E":
				o.preserveEnv = true
			case "i":
				o.login = true
			case "s":
				o.shell = true
			case "l":
				o.list = true
			case "V":
				o.version = true
			case "h":
				o.help = true
			case "v", "k", "K":
				o.noop = true
			case "b":
				o.background = true
			case "u", "g", "p", "C", "D", "T", "U", "r", "t":
				v, err := value(c, rest)
				if err != nil {
					return o, err
				}
				switch c {
				case "u":
					o.user = v
				case "g", "D", "U":
					o.unsupportedOpt = "-" + c
				}
				j = len(a)
			default:
				return o, fmt.Errorf("invalid option -- '%s'", c)
			}
		}
	}
	for ; i < len(args) && isAssignment(args[i]); i++ {
		o.assignments = append(o.assignments, args[i])
	}
	o.command = args[i:]
	return o, nil
}

func isAssignment(s string) bool {
	k, _, ok := strings.Cut(s, "=")
	return ok && envKey(k)
}

func envKey(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Main runs sudo's command line args (args[0] is the program name)
// through den-init's socket and returns the exit status to end with.
func Main(args []string, stdout, stderr io.Writer) int {
	return sudoMain(args, Socket, stdout, stderr)
}

func sudoMain(args []string, socket string, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sudo: "+format+"\n", a...)
		return 1
	}
	o, err := parseSudo(args[1:])
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "sudo: %v\n%s", err, sudoUsage)
		return 1
	case o.help:
		fmt.Fprint(stdout, sudoUsage)
		return 0
	case o.version:
		fmt.Fprintln(stdout, "Sudo version 1.9 (den-init)")
		return 0
	case o.unsupportedOpt != "":
		return fail("option %s is not supported in a den sandbox", o.unsupportedOpt)
	case o.background:
		return fail("-b is not supported in a den sandbox: end the command with & instead")
	case o.list:
		fmt.Fprintf(stdout, "User %s may run the following commands:\n    (ALL : ALL) NOPASSWD: ALL\n", currentUser())
		return 0
	case o.noop && len(o.command) == 0:
		return 0
	case len(o.command) == 0 && !o.login && !o.shell:
		fmt.Fprint(stderr, sudoUsage)
		return 1
	}
	req, err := sudoRequestFor(o)
	if err != nil {
		return fail("%v", err)
	}
	return runSudo(socket, req, stderr)
}

// sudoRequestFor is what o asks den-init for.
func sudoRequestFor(o sudoOptions) (sudoRequest, error) {
	req := sudoRequest{User: o.user, Argv: o.command}
	shell := targetShell(o.user)
	switch {
	case o.login:
		req.Cwd = guest.HomeDir
		req.Argv = []string{shell, "-l"}
		if len(o.command) > 0 {
			req.Argv = append(req.Argv, "-c", shellJoin(o.command))
		}
	case o.shell:
		if s := os.Getenv("SHELL"); s != "" {
			shell = s
		}
		req.Argv = []string{shell}
		if len(o.command) > 0 {
			req.Argv = append(req.Argv, "-c", shellJoin(o.command))
		}
	}
	if req.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return req, fmt.Errorf("unable to tell the working directory: %w", err)
		}
		req.Cwd = wd
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if o.preserveEnv || slices.Contains(keptEnv, k) || strings.HasPrefix(k, "LC_") || slices.Contains(o.preserve, k) {
			env = append(env, kv)
		}
	}
	env = withEnv(env, "PATH", securePath)
	env = withEnv(env, "SHELL", shell)
	env = withEnv(env, "SUDO_COMMAND", strings.Join(o.command, " "))
	env = withEnv(env, "SUDO_USER", currentUser())
	env = withEnv(env, "SUDO_UID", fmt.Sprint(os.Getuid()))
	env = withEnv(env, "SUDO_GID", fmt.Sprint(os.Getgid()))
	for _, kv := range o.assignments {
		k, v, _ := strings.Cut(kv, "=")
		env = withEnv(env, k, v)
	}
	req.Env = env
	return req, nil
}

// runSudo sends req with this process's standard files to den-init, then
// passes signals on until the command ends, and returns its status.
func runSudo(socket string, req sudoRequest, stderr io.Writer) int {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(stderr, "sudo: den-init does not answer (%v): this sandbox runs no sudo\n", err)
		return 1
	}
	defer conn.Close()
	b, err := jsonMessage(req)
	if err != nil {
		fmt.Fprintf(stderr, "sudo: %v\n", err)
		return 1
	}
	if _, _, err := conn.WriteMsgUnix(b, unix.UnixRights(0, 1, 2), nil); err != nil {
		fmt.Fprintf(stderr, "sudo: sending the command to den-init: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
	go func() {
		for sig := range sigs {
			_ = writeMessage(conn, sudoSignal{Signal: int(sig.(syscall.Signal))})
		}
	}()
	var reply sudoReply
	if err := readMessage(conn, &reply); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("den-init ended the command without a word")
		}
		fmt.Fprintf(stderr, "sudo: %v\n", err)
		return 1
	}
	signal.Stop(sigs)
	if reply.Error != "" {
		fmt.Fprintf(stderr, "sudo: %s\n", reply.Error)
		return 1
	}
	if reply.Signal != 0 {
		// End as the command did, as sudo does.
		sig := syscall.Signal(reply.Signal)
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig)
		return 128 + reply.Signal
	}
	return reply.ExitCode
}

func jsonMessage(v any) ([]byte, error) {
	var buf strings.Builder
	if err := writeMessage(&buf, v); err != nil {
		return nil, err
	}
	return []byte(buf.String()), nil
}

// currentUser is this process's user name, or its uid.
func currentUser() string {
	uid := os.Getuid()
	name := fmt.Sprint(uid)
	eachPasswd(func(f []string) bool {
		if f[2] == name {
			name = f[0]
			return false
		}
		return true
	})
	return name
}

// targetShell is the login shell of user ("" is root), from /etc/passwd.
func targetShell(user string) string {
	if user == "" {
		user = "root"
	}
	user, _, _ = strings.Cut(user, ":")
	shell := "/bin/sh"
	eachPasswd(func(f []string) bool {
		if f[0] == user || f[2] == user {
			if f[6] != "" {
				shell = f[6]
			}
			return false
		}
		return true
	})
	return shell
}

// eachPasswd calls f with the fields of each line of /etc/passwd until it
// returns false.
func eachPasswd(f func([]string) bool) {
	file, err := os.Open("/etc/passwd")
	if err != nil {
		return
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) == 7 && !f(fields) {
			return
		}
	}
}

// shellJoin quotes args for sh -c, as sudo -i and -s do.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '_' || r == '-' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '+' ||
				r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
