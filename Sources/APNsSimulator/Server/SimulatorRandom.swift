// A small, fast, seedable generator (SplitMix64) for fault rates, latency jitter and response ids:
// one per connection, so draws need no lock and a seed makes a single-connection run repeatable.

struct SimulatorRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A value in [0, 1) with 53 random bits.
    mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// A random version-4 UUID in canonical lowercase form (what APNs uses for apns-id and apns-unique-id).
    mutating func uuidString() -> String {
        var high = next()
        var low = next()
        high = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000  // version 4
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000  // RFC 4122 variant
        return Self.format(high: high, low: low)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    static func format(high: UInt64, low: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            func put(_ value: UInt64, nibbles: Int, from shift: Int) {
                for n in 0..<nibbles {
                    buffer[index] = hexDigits[Int((value >> UInt64(shift - 4 * n)) & 0xF)]
                    index += 1
                }
            }
            put(high, nibbles: 8, from: 60)
            buffer[index] = UInt8(ascii: "-")
            index += 1
            put(high, nibbles: 4, from: 28)
            buffer[index] = UInt8(ascii: "-")
            index += 1
            put(high, nibbles: 4, from: 12)
            buffer[index] = UInt8(ascii: "-")
            index += 1
            put(low, nibbles: 4, from: 60)
            buffer[index] = UInt8(ascii: "-")
            index += 1
            put(low, nibbles: 12, from: 44)
            return index
        }
    }
}

/// FNV-1a, 64-bit: a stable hash (unlike `Hasher`, the same in every process) for decisions that must
/// give one token the same answer every time.
enum StableHash {
    static func fnv1a(_ bytes: some Sequence<UInt8>, seed: UInt64 = 0) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ seed
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        // FNV's low bits mix poorly for short inputs; a final avalanche spreads them.
        hash ^= hash >> 33
        hash &*= 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 33
        return hash
    }

    /// The hash mapped to [0, 1).
    static func unit(_ bytes: some Sequence<UInt8>, seed: UInt64 = 0) -> Double {
        Double(fnv1a(bytes, seed: seed) >> 11) * 0x1.0p-53
    }
}
