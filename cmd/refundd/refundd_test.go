package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// asRefundd, in the environment, makes the test binary run refundd's main
// with the test binary's arguments: the tests run refundd as a user would,
// without building it.
const asRefundd = "FENCEKIT_TEST_AS_REFUNDD"

func TestMain(m *testing.M) {
	if os.Getenv(asRefundd) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refundd runs refundd's main with args, and returns what it printed on
// stdout and stderr, and its error.
func refundd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asRefundd+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Production commands carry no chaos flag: the chaos harness runs its fleet
// through its own hidden command (chaos.AgentCommand), which refundd's usage
// does not list.
func TestRunCarriesNoChaosFlag(t *testing.T) {
	t.Parallel()
	help, _ := refundd(t, "run", "-h")
	if !strings.Contains(help, "-provider-url") {
		t.Fatalf("refundd run -h does not list run's flags:\n%s", help)
	}
	if strings.Contains(strings.ToLower(help), "chaos") {
		t.Errorf("refundd run -h lists a chaos flag:\n%s", help)
	}
	usage, _ := refundd(t)
	if !strings.Contains(usage, "refundd chaos") || strings.Contains(usage, "chaos-agent") {
		t.Errorf("refundd's usage should list chaos and not its hidden agent command:\n%s", usage)
	}
	agent, _ := refundd(t, "chaos-agent", "-h")
	for _, want := range []string{"-chaos-history", "-chaos-control", "-chaos-proc", "-provider-url"} {
		if !strings.Contains(agent, want) {
			t.Errorf("refundd chaos-agent -h lacks %s:\n%s", want, agent)
		}
	}
}
