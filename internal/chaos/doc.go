// Package chaos is refundd chaos: a fault-injection harness that runs a
// fleet of real refundd processes against a throw-away database and the fake
// provider through fault proxies, kills, freezes and cuts them at the
// worker's step boundaries, records every process's history of operations,
// and checks that history against the state machine and the invariants
// (nothing paid twice, no settled job moved, no answer lost).
//
// The fleet's processes are refundd's hidden AgentCommand: refundd run's
// worker with an Agent's hooks, which record the history and report each
// step boundary to the harness. Production refundd run carries none of it.
package chaos
