//go:build race

package proxy

// raceOn shortens the load test under the race detector, which slows it
// about eightfold.
const raceOn = true
