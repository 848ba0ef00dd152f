package testutil

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// CommandCase is one run of a command in a table test: its arguments and what it must
// print and return.
type CommandCase struct {
	// Args are the arguments after the command's own; a fixture is named by its path
	// under the table's directory (see RunCommandCases).
	Args []string
	// Want is the command's output (stdout and stderr), with the fixture directory's
	// path taken out.
	Want string
	// WantErr is the text of the error the command returns, "" for none.
	WantErr string
}

// RunCommandCases runs each case as a subtest on a fresh command from newCmd, with
// prefix (the subcommand's name) before the case's arguments. An argument that ends in
// .yaml or is one of dirs names a fixture in dir, and is given as dir's path joined to
// it (the file need not exist).
func RunCommandCases(t *testing.T, newCmd func() *cobra.Command, prefix []string, dir string, dirs []string, cases map[string]CommandCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := slices.Clone(prefix)
			for _, a := range tc.Args {
				if strings.HasSuffix(a, ".yaml") || slices.Contains(dirs, a) {
					a = filepath.Join(dir, a)
				}
				args = append(args, a)
			}
			var out bytes.Buffer
			cmd := newCmd()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(args)
			err := cmd.Execute()
			CheckOutput(t, out.String(), dir, err, tc.Want, tc.WantErr)
		})
	}
}

// CheckOutput fails t unless out, with the path of dir taken out of it, is want and
// err's text is wantErr ("" for no error).
func CheckOutput(t testing.TB, out, dir string, err error, want, wantErr string) {
	t.Helper()
	if got := strings.ReplaceAll(out, dir+string(filepath.Separator), ""); got != want {
		t.Errorf("output =\n%s\nwant\n%s", got, want)
	}
	gotErr := ""
	if err != nil {
		gotErr = err.Error()
	}
	if gotErr != wantErr {
		t.Errorf("error = %q, want %q", gotErr, wantErr)
	}
}
