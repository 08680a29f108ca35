// The APNs token-auth signing key: an EC P-256 private key from Apple's .p8 file (PKCS#8 PEM) with
// the Key ID and Team ID it belongs to, able to make ES256 provider tokens.

import COpenSSL
import JSON

/// An APNs provider-token signing key (the `.p8` file) with its Key ID and Team ID.
///
/// Immutable and safe to share between threads: OpenSSL 3 allows concurrent signing with one
/// `EVP_PKEY` when each operation has its own context, which `sign` does.
/// `description` shows only the identifiers, never key material.
public final class ProviderTokenKey: @unchecked Sendable, CustomStringConvertible {
    /// The 10-character Key ID Apple shows for the key (the JWT header `kid`).
    public let keyID: String
    /// The 10-character Team ID of the developer account (the JWT claim `iss`).
    public let teamID: String
    let key: OpenSSLKey

    /// Loads a `.p8` file. `password` is needed only for an encrypted PKCS#8 key; Apple's are not encrypted.
    public convenience init(contentsOfFile path: String, keyID: String, teamID: String, password: String? = nil)
        throws(CredentialError)
    {
        let bytes = try CredentialFile.read(path, what: "APNs signing key (.p8)")
        try self.init(pem: bytes, keyID: keyID, teamID: teamID, password: password, source: path)
    }

    /// Loads a P-256 private key from PEM text (PKCS#8 `PRIVATE KEY`, or SEC1 `EC PRIVATE KEY`).
    /// - Parameter source: the file name to mention in errors, if any.
    public init(
        pem: some Collection<UInt8>, keyID: String, teamID: String, password: String? = nil,
        source: String? = nil
    ) throws(CredentialError) {
        try Self.checkIdentifier(keyID, kind: .keyID)
        try Self.checkIdentifier(teamID, kind: .teamID)
        self.keyID = keyID
        self.teamID = teamID
        self.key = try OpenSSLKey.privateKey(fromPEM: Array(pem), password: password, source: source)
        try key.requireP256(source: source, role: "APNs signing key")
    }

    init(key: OpenSSLKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Makes a fresh P-256 key, for tests, the simulator and `apns-worker dev`.
    public static func generate(keyID: String, teamID: String) throws(CredentialError) -> ProviderTokenKey {
        try checkIdentifier(keyID, kind: .keyID)
        try checkIdentifier(teamID, kind: .teamID)
        return ProviderTokenKey(key: try OpenSSLKey.generateP256(), keyID: keyID, teamID: teamID)
    }

    /// The key as a .p8 file holds it (unencrypted PKCS#8 PEM): for `credentials generate-key`, whose keys
    /// only the simulator trusts. A secret: write it to a file of mode 0600, never to a log.
    public var privateKeyPEM: String { key.privateKeyPEM }

    /// The public half as PEM (`-----BEGIN PUBLIC KEY-----`), to give a token verifier.
    public var publicKeyPEM: String { key.publicKeyPEM }

    /// Signs a message with ECDSA P-256 / SHA-256; returns the 64-byte raw `r || s`.
    public func sign(_ message: some Collection<UInt8>) throws(CredentialError) -> [UInt8] {
        try ECDSASignature.raw(fromDER: try key.signSHA256(Array(message)))
    }

    /// Makes a signed provider token issued at `issuedAt` (UNIX seconds).
    public func makeToken(issuedAt: Int64) throws(CredentialError) -> ProviderToken {
        let header: JSONValue = ["alg": "ES256", "kid": .string(keyID)]
        let claims: JSONValue = ["iss": .string(teamID), "iat": .int(issuedAt)]
        let signingInput = Base64URL.encode(header.compactBytes) + "." + Base64URL.encode(claims.compactBytes)
        let signature = try sign(Array(signingInput.utf8))
        return ProviderToken(
            jwt: signingInput + "." + Base64URL.encode(signature), keyID: keyID, teamID: teamID, issuedAt: issuedAt)
    }

    public var description: String { "ProviderTokenKey(keyID: \(keyID), teamID: \(teamID))" }

    /// Which identifier `checkIdentifier` is checking, for its message.
    public enum IdentifierKind: Sendable {
        case keyID, teamID
    }

    /// Checks a Key ID or Team ID: 10 characters, each an uppercase letter A-Z or a digit.
    public static func checkIdentifier(_ value: String, kind: IdentifierKind) throws(CredentialError) {
        let valid =
            value.utf8.count == 10
            && value.utf8.allSatisfy {
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
        guard !valid else { return }
        let (name, code, whereToFind): (String, CredentialError.Code, String) =
            switch kind {
            case .keyID: ("Key ID", .invalidKeyID, "Certificates, Identifiers & Profiles > Keys, next to the key")
            case .teamID: ("Team ID", .invalidTeamID, "Membership details of your Apple Developer account")
            }
        let shown = value.count <= 40 ? "'\(value)'" : "a \(value.count)-character value"
        throw CredentialError(
            code,
            "\(name) \(shown) is not valid: it must be exactly 10 characters, uppercase letters A-Z and digits "
                + "(like 'ABC123DEFG'); copy it from \(whereToFind)")
    }
}

/// A signed APNs provider token (JWT). `description` hides the token itself.
public struct ProviderToken: Sendable, Hashable, CustomStringConvertible {
    /// The token's fields in one object: a token goes with every request (into its first attempt, for
    /// ExpiredProviderToken), and a reference is one retain where five fields were four.
    private final class Storage: Sendable {
        let jwt: String
        let keyID: String
        let teamID: String
        let issuedAt: Int64
        let authorizationHeaderValue: String

        init(jwt: String, keyID: String, teamID: String, issuedAt: Int64) {
            self.jwt = jwt
            self.keyID = keyID
            self.teamID = teamID
            self.issuedAt = issuedAt
            authorizationHeaderValue = "bearer " + jwt
        }
    }
    private let storage: Storage

    /// The compact JWS, the value after `bearer ` in the `authorization` header. Secret: never log it.
    public var jwt: String { storage.jwt }
    public var keyID: String { storage.keyID }
    public var teamID: String { storage.teamID }
    /// The `iat` claim, UNIX seconds.
    public var issuedAt: Int64 { storage.issuedAt }

    /// The `authorization` header value: `bearer <jwt>`. Made once per token, not once per request.
    public var authorizationHeaderValue: String { storage.authorizationHeaderValue }

    public init(jwt: String, keyID: String, teamID: String, issuedAt: Int64) {
        storage = Storage(jwt: jwt, keyID: keyID, teamID: teamID, issuedAt: issuedAt)
    }

    public static func == (lhs: ProviderToken, rhs: ProviderToken) -> Bool {
        lhs.storage === rhs.storage
            || (lhs.jwt == rhs.jwt && lhs.keyID == rhs.keyID && lhs.teamID == rhs.teamID
                && lhs.issuedAt == rhs.issuedAt)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(jwt)
        hasher.combine(keyID)
        hasher.combine(teamID)
        hasher.combine(issuedAt)
    }

    public var description: String { "ProviderToken(keyID: \(keyID), teamID: \(teamID), issuedAt: \(issuedAt))" }
}
