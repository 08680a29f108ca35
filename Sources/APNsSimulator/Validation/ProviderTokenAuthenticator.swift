// Token authentication as APNs does it, per connection: ES256 signature by key id (via the APNs
// module's ProviderTokenVerifier), the token's age, how often a connection changes its token, and
// that a connection keeps the key of its first token.

import APNs

/// What one connection has shown so far.
struct ProviderTokenConnectionState: Sendable {
    /// The key of the connection's first accepted token; later tokens must use it.
    var keyID: String?
    /// The token in use and when (UNIX seconds) the connection adopted it.
    var token: String?
    var verified: VerifiedProviderToken?
    var adoptedAt: Int64 = 0
}

/// The outcome of checking an `authorization` header.
enum ProviderTokenCheck: Sendable, Hashable {
    /// Accepted; the token's key id.
    case accepted(keyID: String)
    case rejected(APNsErrorReason)
}

/// Checks `authorization` headers. Immutable; safe from any thread.
struct ProviderTokenAuthenticator: Sendable {
    let verifier: ProviderTokenVerifier
    /// The team each key belongs to, when configured; a token whose `iss` differs is invalid.
    let teamByKeyID: [String: String]
    /// APNs refuses tokens older than this (seconds). Default: 3600.
    let maximumAge: Int64
    /// A connection may change its token at most this often (seconds). Default: 1200.
    let minimumUpdateInterval: Int64

    /// The key id of the accepted token, or the reason APNs gives for refusing it.
    /// Updates `connection` when a new token is adopted.
    func check(authorization: String?, connection: inout ProviderTokenConnectionState, now: Int64)
        -> ProviderTokenCheck
    {
        guard let authorization, !authorization.isEmpty else { return .rejected(.missingProviderToken) }
        guard authorization.utf8.count > 7,
            authorization.utf8.prefix(7).lazy.map({ $0 | 0x20 })
                .elementsEqual("bearer ".utf8)
        else { return .rejected(.invalidProviderToken) }
        let token = authorization.utf8.dropFirst(7)
        // Nearly every request repeats the connection's token: compare bytes (String's own comparison
        // would normalise, and a generic UTF8View walk costs a bounds check per byte of a 160-byte JWT).
        if let current = connection.token, let verified = connection.verified,
            Self.sameBytes(current, authorization, droppingPrefix: 7)
        {
            return now - verified.issuedAt > maximumAge
                ? .rejected(.expiredProviderToken) : .accepted(keyID: verified.keyID)
        }
        let tokenText = String(Substring(token))
        let verified: VerifiedProviderToken
        do {
            verified = try verifier.verify(tokenText)
        } catch {
            return .rejected(.invalidProviderToken)
        }
        if let team = teamByKeyID[verified.keyID], team != verified.teamID { return .rejected(.invalidProviderToken) }
        if let keyID = connection.keyID, keyID != verified.keyID { return .rejected(.unrelatedKeyIdInToken) }
        if now - verified.issuedAt > maximumAge { return .rejected(.expiredProviderToken) }
        if connection.token != nil && now - connection.adoptedAt < minimumUpdateInterval {
            return .rejected(.tooManyProviderTokenUpdates)
        }
        connection.keyID = verified.keyID
        connection.token = tokenText
        connection.verified = verified
        connection.adoptedAt = now
        return .accepted(keyID: verified.keyID)
    }

    /// Whether `text` without its first `prefix` bytes is byte for byte `current`.
    private static func sameBytes(_ current: String, _ text: String, droppingPrefix prefix: Int) -> Bool {
        var current = current
        var text = text
        return current.withUTF8 { currentBytes in
            text.withUTF8 { textBytes in
                textBytes.count >= prefix
                    && ASCIIBytes.equal(UnsafeBufferPointer(rebasing: textBytes.dropFirst(prefix)), currentBytes)
            }
        }
    }
}
