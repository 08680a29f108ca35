// Randomness tests can replay: every randomized test draws from a generator whose seed it prints, and
// TEST_SEED=<seed> in the environment makes the next run draw the same values.

import Foundation

/// SplitMix64: small, fast, and the same sequence on every platform for a given seed.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    package private(set) var state: UInt64

    package init(seed: UInt64) { state = seed }

    /// A generator seeded from `TEST_SEED` when it is set, otherwise with `defaultSeed`, otherwise from
    /// the system's generator; prints the seed with `name` so a failing run can be replayed.
    package static func replayable(_ name: String, defaultSeed: UInt64? = nil) -> SeededGenerator {
        let environment = ProcessInfo.processInfo.environment["TEST_SEED"]
        let seed = environment.flatMap { UInt64($0) } ?? defaultSeed ?? UInt64.random(in: .min ... .max)
        print("\(name): random seed \(seed) (replay with TEST_SEED=\(seed))")
        return SeededGenerator(seed: seed)
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
