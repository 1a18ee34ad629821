package runsc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/den-dev/den/internal/peers"

	"github.com/den-dev/den/internal/guest"
	"github.com/den-dev/den/internal/sandbox"
)

// The OCI runtime spec, as much of it as den writes. Restore checks mounts,
// args, cwd, user, capabilities and namespaces against the checkpoint, so
// everything here must depend only on the instance, never on the moment.

type ociSpec struct {
	Version     string            `json:"ociVersion"`
	Process     ociProcess        `json:"process"`
	Root        ociRoot           `json:"root"`
	Hostname    string            `json:"hostname"`
	Mounts      []ociMount        `json:"mounts"`
	Linux       ociLinux          `json:"linux"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociProcess struct {
	Args         []string        `json:"args"`
	Env          []string        `json:"env"`
	Cwd          string          `json:"cwd"`
	User         ociUser         `json:"user"`
	Capabilities ociCapabilities `json:"capabilities"`
	Rlimits      []ociRlimit     `json:"rlimits,omitempty"`
}

type ociUser struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

type ociCapabilities struct {
	Bounding  []string `json:"bounding"`
	Effective []string `json:"effective"`
	Permitted []string `json:"permitted"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Namespaces  []ociNamespace `json:"namespaces"`
	CgroupsPath string         `json:"cgroupsPath"`
	Resources   *ociResources  `json:"resources,omitempty"`
}

type ociNamespace struct {
	Type string `json:"type"`
	Path string `json:"path,omitempty"`
}

type ociResources struct {
	Memory *ociMemory `json:"memory,omitempty"`
	CPU    *ociCPU    `json:"cpu,omitempty"`
	Pids   *ociPids   `json:"pids,omitempty"`
}

type ociPids struct {
	Limit int64 `json:"limit"`
}

type ociMemory struct {
	Limit int64 `json:"limit"`
}

type ociCPU struct {
	Quota  int64  `json:"quota"`
	Period uint64 `json:"period"`
}

// capabilities root holds inside a sandbox: what a Linux container usually
// gets, enough for package managers and for den-init to switch users.
var capabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	"CAP_SYS_PTRACE",
	// den-init keeps it to stay out of the process limit it sets for
	// everything else; it forks every process without it (see
	// internal/initd).
	"CAP_SYS_RESOURCE",
}

// InitPath is where den-init appears inside every sandbox.
const InitPath = guest.InitPath

const cpuPeriod = 100000

func (r *Runtime) spec(inst sandbox.Instance) ociSpec {
	// The host's cgroups are backstops; see limits.go.
	res := ociResources{Pids: &ociPids{Limit: HostPIDs(0)}}
	if inst.MemoryBytes > 0 {
		res.Memory = &ociMemory{Limit: HostMemory(inst.MemoryBytes)}
	}
	if inst.CPUs > 0 {
		res.CPU = &ociCPU{Quota: int64(inst.CPUs * cpuPeriod), Period: cpuPeriod}
	}
	spec := ociSpec{
		Version: "1.0.2",
		Process: ociProcess{
			Args: []string{InitPath},
			Env:  inst.Env,
			Cwd:  "/",
			User: ociUser{UID: 0, GID: 0},
			Capabilities: ociCapabilities{
				Bounding: capabilities, Effective: capabilities, Permitted: capabilities,
			},
			Rlimits: []ociRlimit{{Type: "RLIMIT_NOFILE", Hard: 1 << 20, Soft: 1 << 20}},
		},
		Root:     ociRoot{Path: inst.Rootfs},
		Hostname: inst.Hostname,
		Mounts: []ociMount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			// gVisor's own cgroups, where den-init reads what the
			// sandbox uses (see limits.go).
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"ro"}},
		},
		Linux: ociLinux{
			Namespaces: []ociNamespace{
				{Type: "pid"}, {Type: "ipc"}, {Type: "uts"}, {Type: "mount"},
				{Type: "network", Path: inst.Netns},
			},
			CgroupsPath: cgroupsPath(inst.ID),
			Resources:   &res,
		},
	}
	// den-init and the resolver's address come from the host, in this
	// order, to instances whose den-init is not in their root filesystem
	// (initroot.go): their memory images restore only with these mounts.
	hostMounts := !inRoot(inst.Init)
	if hostMounts {
		spec.Mounts = append(spec.Mounts, ociMount{Destination: "/.den", Type: "bind", Source: r.initDir(inst.Init), Options: []string{"rbind", "ro"}})
	}
	// Secret files, written at exec time, removed before any checkpoint:
	// in memory, never on the sandbox's disk.
	spec.Mounts = append(spec.Mounts, ociMount{Destination: guest.SecretDir, Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=1777", "size=8m"}})
	if hostMounts && r.cfg.ResolvConf != "" {
		spec.Mounts = append(spec.Mounts, ociMount{Destination: "/etc/resolv.conf", Type: "bind", Source: r.cfg.ResolvConf, Options: []string{"rbind", "ro"}})
	}
	if inst.ViewsDir != "" {
		// den's own directory of views, which come and go while the
		// instance runs (peers/place.go): mounts den makes in it on the
		// host reach the gofer, which serves it with shared access.
		spec.Mounts = append(spec.Mounts, ociMount{Destination: peers.Root, Type: "bind", Source: inst.ViewsDir, Options: []string{"rbind", "ro"}})
	}
	for _, v := range inst.Views {
		// Other sandboxes' files, read-only twice over: the mount here,
		// and the snapshot on the host.
		spec.Mounts = append(spec.Mounts, ociMount{Destination: v.Destination, Type: "bind", Source: v.Source, Options: []string{"rbind", "ro"}})
	}
	return spec
}

// SpecHash is a sha256 (hex) of what restore validates in inst's spec:
// the process (args, cwd, user, capabilities, rlimits), each mount's
// destination, type and options, the namespace types and the
// annotations. What may change between checkpoint and restore is left
// out: root path, mount sources, hostname, environment, cgroups path,
// namespace paths and resources. Two instances with the same hash restore
// each other's images as far as the spec is concerned.
func (r *Runtime) SpecHash(inst sandbox.Instance) string {
	return hashSpec(r.spec(inst))
}

func hashSpec(spec ociSpec) string {
	type mount struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Options     []string `json:"options"`
	}
	checked := struct {
		Args         []string          `json:"args"`
		Cwd          string            `json:"cwd"`
		User         ociUser           `json:"user"`
		Capabilities ociCapabilities   `json:"capabilities"`
		Rlimits      []ociRlimit       `json:"rlimits"`
		Mounts       []mount           `json:"mounts"`
		Namespaces   []string          `json:"namespaces"`
		Annotations  map[string]string `json:"annotations"`
	}{
		Args:         spec.Process.Args,
		Cwd:          spec.Process.Cwd,
		User:         spec.Process.User,
		Capabilities: spec.Process.Capabilities,
		Rlimits:      spec.Process.Rlimits,
		Annotations:  spec.Annotations,
	}
	for _, m := range spec.Mounts {
		checked.Mounts = append(checked.Mounts, mount{m.Destination, m.Type, m.Options})
	}
	for _, ns := range spec.Linux.Namespaces {
		checked.Namespaces = append(checked.Namespaces, ns.Type)
	}
	b, err := json.Marshal(checked)
	if err != nil {
		panic(err) // plain strings and numbers always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
