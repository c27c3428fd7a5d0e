package core

import "strings"

// Redis Cluster support lives in the pieces every kind shares:
//
//   - keys: every key and channel of one lock carries the hash tag {name}
//     (keys.go), so each script touches one slot;
//   - pub/sub: the hub (pubsub.go) uses sharded pub/sub (SSUBSCRIBE, and
//     SPUBLISH in the scripts, which get the command name as an argument and
//     the channel in KEYS) when the servers have it, plain pub/sub otherwise;
//   - replica sync (replica.go) sends WAIT to the master of the lock's slot.
//
// This file holds the slot computation they need.

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// clusterSlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// the key's hash tag (the text between the first '{' and the next '}', when
// non-empty), else of the whole key, modulo 16384.
func clusterSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the checksum
// Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
