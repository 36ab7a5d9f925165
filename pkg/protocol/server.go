package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinServerVersion is the oldest nats-server Kagzi runs on: the version of
// Debian's package (bookworm's 2.9), on which the project's claims about
// frozen and lost processes are tested with the server's default settings,
// beside the version the project pins. Older servers lack behaviour the
// engine relies on (headers and "no responders" on requests, since 2.2;
// the permissions of `kagzi nats-config`, allow_responses) and are not
// tested.
const MinServerVersion = "2.9.0"

// ErrServerVersion: the NATS server is older than MinServerVersion, or
// announced no version Kagzi can read.
var ErrServerVersion = errors.New("unsupported nats-server version")

// CheckServerVersion returns an error wrapping ErrServerVersion unless
// version, the one a server announces in its INFO (e.g. "2.9.10",
// "2.11.0-RC.1"), is MinServerVersion or newer.
func CheckServerVersion(version string) error {
	have, ok := parseServerVersion(version)
	if !ok {
		return fmt.Errorf("%w: the server announced %q; Kagzi needs nats-server %s or newer", ErrServerVersion,
			ClipText(version, 40), MinServerVersion)
	}
	want, _ := parseServerVersion(MinServerVersion)
	for i := range have {
		if have[i] != want[i] {
			if have[i] < want[i] {
				return fmt.Errorf("%w: nats-server %s is older than %s, the oldest Kagzi supports; upgrade the server",
					ErrServerVersion, version, MinServerVersion)
			}
			return nil
		}
	}
	return nil
}

// parseServerVersion reads major.minor.patch, ignoring a pre-release or
// build suffix.
func parseServerVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
