// The broadcast channels the simulator's channel management API created, per app, with their message
// storage policy: what `POST /4/broadcasts/apps/...` is checked against.

import Synchronization

/// Channels by app (bundle id), shared by every connection.
///
/// - Important: thread-safe.
final class ChannelRegistry: Sendable {
    /// Apple, "Sending channel management requests to APNs": "you can maintain up to 10,000 channels for
    /// your app in the development and production environment, respectively".
    static let defaultLimitPerApp = 10_000

    private struct State {
        /// Bundle id → channel id → message storage policy (0 or 1).
        var channels: [String: [String: Int]] = [:]
        var created: UInt64 = 0
    }

    private let state = Mutex(State())
    let limitPerApp: Int
    private let seed: UInt64

    init(seed: UInt64 = 1, limitPerApp: Int = ChannelRegistry.defaultLimitPerApp) {
        self.seed = seed
        self.limitPerApp = limitPerApp
    }

    /// Creates a channel; nil when the app already has `limitPerApp`.
    func create(bundle: String, storagePolicy: Int) -> String? {
        state.withLock { state in
            if state.channels[bundle, default: [:]].count >= limitPerApp { return nil }
            state.created += 1
            let id = Self.channelID(seed: seed, ordinal: state.created)
            state.channels[bundle, default: [:]][id] = storagePolicy
            return id
        }
    }

    /// The channel's message storage policy; nil when it does not exist.
    func storagePolicy(bundle: String, channel: String) -> Int? {
        state.withLock { $0.channels[bundle]?[channel] }
    }

    /// Deletes a channel; false when it did not exist.
    func delete(bundle: String, channel: String) -> Bool {
        state.withLock { $0.channels[bundle]?.removeValue(forKey: channel) != nil }
    }

    /// The app's channels, sorted.
    func list(bundle: String) -> [String] {
        state.withLock { ($0.channels[bundle] ?? [:]).keys.sorted() }
    }

    /// 16 bytes, base64 as Apple's ids are ("The channel ID is a base64-encoded string", ActivityKit),
    /// distinct per ordinal and varying with the seed.
    static func channelID(seed: UInt64, ordinal: UInt64) -> String {
        var random = SimulatorRandom(seed: seed &+ ordinal &* 0x9E37_79B9_7F4A_7C15)
        var bytes: [UInt8] = []
        for _ in 0..<2 {
            var word = random.next()
            for _ in 0..<8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return base64(bytes)
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func base64(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let b0 = Int(bytes[index])
            let b1 = index + 1 < bytes.count ? Int(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? Int(bytes[index + 2]) : 0
            out.append(alphabet[b0 >> 2])
            out.append(alphabet[((b0 & 3) << 4) | (b1 >> 4)])
            out.append(index + 1 < bytes.count ? alphabet[((b1 & 15) << 2) | (b2 >> 6)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[b2 & 63] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
