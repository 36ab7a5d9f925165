package cliutil

import (
	"os"
	"os/user"

	"github.com/spf13/pflag"
)

// PauseFlags are the flags of every pause command: why, and who.
type PauseFlags struct {
	Reason string
	By     string
}

// Register adds --reason and --by to f.
func (p *PauseFlags) Register(f *pflag.FlagSet) {
	f.StringVar(&p.Reason, "reason", "", "why it is paused (shown by run show and the console)")
	f.StringVar(&p.By, "by", "", "who pauses (default: the OS user, else \"cli\")")
}

// Who is --by, else the OS user running the command, else "cli".
func (p *PauseFlags) Who() string {
	if p.By != "" {
		return p.By
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "cli"
}
