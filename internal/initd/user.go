package initd

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/den-dev/den/internal/errdefs"
)

// account is who a process runs as.
type account struct {
	uid, gid uint32
	groups   []uint32 // supplementary groups
	name     string   // "" when the uid has no passwd entry
	home     string
}

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

// lookupAccount resolves a ProcSpec.User: "" (den-init's own user), a name,
// a uid, or either followed by ":group" (a gid or a group name). Names are
// looked up in passwd and group under etc, the sandbox's own files.
// Like Docker, a uid with no passwd entry gets gid 0 and home "/".
func lookupAccount(etc, spec string) (account, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if spec == "" {
		userPart = strconv.Itoa(os.Geteuid())
	}
	users, err := readPasswd(filepath.Join(etc, "passwd"))
	if err != nil {
		return account{}, err
	}
	var acct account
	if id, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		acct = account{uid: uint32(id), home: "/"}
		for _, u := range users {
			if u.uid == acct.uid {
				acct = account{uid: u.uid, gid: u.gid, name: u.name, home: u.home}
				break
			}
		}
	} else {
		found := false
		for _, u := range users {
			if u.name == userPart {
				acct = account{uid: u.uid, gid: u.gid, name: u.name, home: u.home}
				found = true
				break
			}
		}
		if !found {
			return account{}, errdefs.WithHint(errdefs.Invalid("no user %q in the sandbox", userPart),
				"create the user first (useradd), or give a numeric uid")
		}
	}
	groups, err := readGroups(filepath.Join(etc, "group"))
	if err != nil {
		return account{}, err
	}
	if hasGroup {
		gid, err := groupID(groups, groupPart)
		if err != nil {
			return account{}, err
		}
		acct.gid = gid
	}
	acct.groups = []uint32{acct.gid}
	if acct.name != "" {
		for _, g := range groups {
			if g.gid != acct.gid && g.hasMember(acct.name) {
				acct.groups = append(acct.groups, g.gid)
			}
		}
	}
	if acct.home == "" {
		acct.home = "/"
	}
	return acct, nil
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

func (g groupEntry) hasMember(name string) bool {
	for _, m := range g.members {
		if m == name {
			return true
		}
	}
	return false
}

func groupID(groups []groupEntry, spec string) (uint32, error) {
	if id, err := strconv.ParseUint(spec, 10, 32); err == nil {
		return uint32(id), nil
	}
	for _, g := range groups {
		if g.name == spec {
			return g.gid, nil
		}
	}
	return 0, errdefs.WithHint(errdefs.Invalid("no group %q in the sandbox", spec),
		"create the group first (groupadd), or give a numeric gid")
}

// readPasswd parses a passwd file; a missing file is an empty one.
func readPasswd(file string) ([]passwdEntry, error) {
	var out []passwdEntry
	err := readColonFile(file, func(f []string) {
		if len(f) < 6 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]})
	})
	return out, err
}

// readGroups parses a group file; a missing file is an empty one.
func readGroups(file string) ([]groupEntry, error) {
	var out []groupEntry
	err := readColonFile(file, func(f []string) {
		if len(f) < 4 {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return
		}
		g := groupEntry{name: f[0], gid: uint32(gid)}
		if f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	})
	return out, err
}

func readColonFile(file string, line func([]string)) error {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		line(strings.Split(text, ":"))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	return nil
}
