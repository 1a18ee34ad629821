// Package users knows the sandbox's accounts, from its own passwd and
// group files, and does a call with one user's credentials: the user a
// process runs as, the owner of a file a request makes, the user a file
// route is done as.
//
// It never reads the host's account files (only those under the etc
// directory it is given), and never changes the credentials of any OS
// thread but the one it locks for a call (see RunAs).
package users

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

// Account is who a process runs as.
type Account struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
	Name     string   // "" when the uid has no passwd entry
	Home     string
}

// User is one line of /etc/passwd.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
}

// Lookup resolves a ProcSpec.User: "" (den-init's own user), a name,
// a uid, or either followed by ":group" (a gid or a group name). Names are
// looked up in passwd and group under etc, the sandbox's own files.
// Like Docker, a uid with no passwd entry gets gid 0 and home "/".
func Lookup(etc, spec string) (Account, error) {
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if spec == "" {
		userPart = strconv.Itoa(os.Geteuid())
	}
	users, err := ReadPasswd(filepath.Join(etc, "passwd"))
	if err != nil {
		return Account{}, err
	}
	var acct Account
	if id, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		acct = Account{UID: uint32(id), Home: "/"}
		for _, u := range users {
			if u.UID == acct.UID {
				acct = Account{UID: u.UID, GID: u.GID, Name: u.Name, Home: u.Home}
				break
			}
		}
	} else {
		found := false
		for _, u := range users {
			if u.Name == userPart {
				acct = Account{UID: u.UID, GID: u.GID, Name: u.Name, Home: u.Home}
				found = true
				break
			}
		}
		if !found {
			return Account{}, errdefs.WithHint(errdefs.Invalid("no user %q in the sandbox", userPart),
				"create the user first (useradd), or give a numeric uid")
		}
	}
	groups, err := ReadGroups(filepath.Join(etc, "group"))
	if err != nil {
		return Account{}, err
	}
	if hasGroup {
		gid, err := groupID(groups, groupPart)
		if err != nil {
			return Account{}, err
		}
		acct.GID = gid
	}
	acct.Groups = []uint32{acct.GID}
	if acct.Name != "" {
		for _, g := range groups {
			if g.GID != acct.GID && g.HasMember(acct.Name) {
				acct.Groups = append(acct.Groups, g.GID)
			}
		}
	}
	if acct.Home == "" {
		acct.Home = "/"
	}
	return acct, nil
}

// Group is one line of /etc/group.
type Group struct {
	Name    string
	GID     uint32
	Members []string
}

// HasMember reports whether name is listed as a member of g.
func (g Group) HasMember(name string) bool {
	for _, m := range g.Members {
		if m == name {
			return true
		}
	}
	return false
}

func groupID(groups []Group, spec string) (uint32, error) {
	if id, err := strconv.ParseUint(spec, 10, 32); err == nil {
		return uint32(id), nil
	}
	for _, g := range groups {
		if g.Name == spec {
			return g.GID, nil
		}
	}
	return 0, errdefs.WithHint(errdefs.Invalid("no group %q in the sandbox", spec),
		"create the group first (groupadd), or give a numeric gid")
}

// ReadPasswd parses a passwd file; a missing file is an empty one.
func ReadPasswd(file string) ([]User, error) {
	var out []User
	err := readColonFile(file, func(f []string) {
		if len(f) < 6 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return
		}
		out = append(out, User{Name: f[0], UID: uint32(uid), GID: uint32(gid), Home: f[5]})
	})
	return out, err
}

// ReadGroups parses a group file; a missing file is an empty one.
func ReadGroups(file string) ([]Group, error) {
	var out []Group
	err := readColonFile(file, func(f []string) {
		if len(f) < 4 {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return
		}
		g := Group{Name: f[0], GID: uint32(gid)}
		if f[3] != "" {
			g.Members = strings.Split(f[3], ",")
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
