//go:build !race

package proxy

const raceOn = false
