package modeltest

import (
	"encoding/json"
	"fmt"
	"os"
)

// Regression is a checked-in case: a program that once diverged (the
// minimal program of a divergence), run by every model test from then on.
type Regression struct {
	// Seed and Index generated the program the divergence was found in.
	Seed  uint64 `json:"seed"`
	Index int    `json:"index"`
	// Note says what diverged.
	Note    string  `json:"note"`
	Program Program `json:"program"`
}

// LoadRegressions reads a file of regression cases (a JSON array).
func LoadRegressions(path string) ([]Regression, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Regression
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}
