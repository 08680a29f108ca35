// Shares one provider token per key across every connection and replaces it inside APNs' window:
// older than an hour is rejected (ExpiredProviderToken), newer than 20 minutes is throttled
// (TooManyProviderTokenUpdates).

import Glibc
import Platform
import Synchronization

/// Hands out the current provider token of one key, signing a new one when it reaches the refresh age.
///
/// One signer per key, shared by all connections and tasks. `token()` may be called from any thread
/// or task at any rate: it signs at most once per refresh (one ES256 signature, made while holding
/// the lock so concurrent callers wait for that one signature instead of making their own).
/// A token is never replaced before it is `minimumRefreshAge` (20 minutes) old, even after
/// `invalidate(_:)`.
public final class ProviderTokenSigner: Sendable {
    /// APNs throttles tokens replaced more often than this (429 TooManyProviderTokenUpdates). Seconds.
    public static let minimumRefreshAge: Int64 = 20 * 60
    /// APNs rejects tokens older than this (403 ExpiredProviderToken). Seconds.
    public static let maximumRefreshAge: Int64 = 60 * 60
    /// The default age at which a token is replaced: 50 minutes, in seconds.
    public static let defaultRefreshAge: Int64 = 50 * 60

    /// The current time in UNIX seconds, from the system clock.
    public static let systemClock: @Sendable () -> Int64 = { WallClockTime.now().seconds }

    /// The key the tokens are signed with.
    public let key: ProviderTokenKey
    /// Age (seconds) at which `token()` replaces the token; within 20...60 minutes.
    public let refreshAge: Int64
    private let now: @Sendable () -> Int64
    private let state = Mutex(State())

    private struct State {
        var current: ProviderToken?
        var refreshRequested = false
        var signatures = 0
    }

    /// - Parameters:
    ///   - refreshAge: seconds after which a token is replaced; 1200...3600. Default: 3000 (50 minutes).
    ///   - now: the clock, UNIX seconds; injectable for tests.
    public init(
        key: ProviderTokenKey, refreshAge: Int64 = ProviderTokenSigner.defaultRefreshAge,
        now: @escaping @Sendable () -> Int64 = ProviderTokenSigner.systemClock
    ) throws(CredentialError) {
        guard (Self.minimumRefreshAge...Self.maximumRefreshAge).contains(refreshAge) else {
            throw CredentialError(
                .invalidConfiguration,
                "token refresh age \(refreshAge) s is outside APNs' window: it must be between "
                    + "\(Self.minimumRefreshAge) s (20 minutes) and \(Self.maximumRefreshAge) s (60 minutes)")
        }
        self.key = key
        self.refreshAge = refreshAge
        self.now = now
    }

    /// The Key ID of every token this signer makes.
    public var keyID: String { key.keyID }
    /// The Team ID of every token this signer makes.
    public var teamID: String { key.teamID }

    /// The token to send now; signs a new one when none exists, when the current one has reached
    /// `refreshAge`, or when a refresh was requested and the current one is at least 20 minutes old.
    public func token() throws(CredentialError) -> ProviderToken {
        let time = now()
        return try state.withLock { (state: inout State) throws(CredentialError) -> ProviderToken in
            if let current = state.current {
                // A clock that stepped backwards makes the age negative; keep the token rather than
                // sign one APNs may count as a too-early replacement.
                let age = time - current.issuedAt
                let due = age >= refreshAge || (state.refreshRequested && age >= Self.minimumRefreshAge)
                if !due { return current }
            }
            let fresh = try key.makeToken(issuedAt: time)
            state.current = fresh
            state.refreshRequested = false
            state.signatures += 1
            return fresh
        }
    }

    /// Asks for a new token after APNs answered 403 ExpiredProviderToken.
    ///
    /// Passing the rejected token makes the request apply only while that token is still current, so
    /// that many connections reporting the same rejection cause one refresh. The new token is signed
    /// by the next `token()` once the current one is at least 20 minutes old.
    public func invalidate(_ rejected: ProviderToken? = nil) {
        state.withLock { state in
            guard let current = state.current else { return }
            if rejected == nil || rejected?.jwt == current.jwt { state.refreshRequested = true }
        }
    }

    /// The current token's age in seconds (for a metric), or nil before the first token.
    public var tokenAge: Int64? {
        let time = now()
        return state.withLock { state in state.current.map { max(0, time - $0.issuedAt) } }
    }

    /// How many tokens this signer has signed so far.
    public var signatureCount: Int { state.withLock { $0.signatures } }
}
