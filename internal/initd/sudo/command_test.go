package sudo

import (
	"reflect"
	"testing"
)

func TestParseSudo(t *testing.T) {
	tests := []struct {
		args []string
		want sudoOptions
	}{
		{[]string{"whoami"}, sudoOptions{command: []string{"whoami"}}},
		{[]string{"-n", "-E", "ls", "-l"}, sudoOptions{preserveEnv: true, command: []string{"ls", "-l"}}},
		{[]string{"-nu", "bob", "--", "-x"}, sudoOptions{user: "bob", command: []string{"-x"}}},
		{[]string{"-ubob", "id"}, sudoOptions{user: "bob", command: []string{"id"}}},
		{[]string{"--user=bob", "--preserve-env=A,B", "X=1", "env"}, sudoOptions{user: "bob", preserve: []string{"A", "B"}, assignments: []string{"X=1"}, command: []string{"env"}}},
		{[]string{"-i"}, sudoOptions{login: true, command: []string{}}},
		{[]string{"-s", "echo", "a b"}, sudoOptions{shell: true, command: []string{"echo", "a b"}}},
		{[]string{"-v"}, sudoOptions{noop: true, command: []string{}}},
		{[]string{"-g", "wheel", "id"}, sudoOptions{unsupportedOpt: "-g", command: []string{"id"}}},
	}
	for _, tt := range tests {
		got, err := parseSudo(tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tt.args, got, tt.want)
		}
	}
	for _, bad := range [][]string{{"-Z", "x"}, {"-u"}, {"--frobnicate"}} {
		if _, err := parseSudo(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got := shellJoin([]string{"echo", "a b", "it's", "x=1"}); got != `echo 'a b' 'it'\''s' x=1` {
		t.Errorf("shellJoin: %s", got)
	}
}
