// Checks APNs provider tokens the way APNs does, for the simulator and for tests: ES256 over
// base64url header.claims with a known key, raw r||s signature, kid/iss/iat present.

import JSON

/// Verifies ES256 provider tokens against P-256 public keys looked up by Key ID.
///
/// Immutable and safe to use from any thread. It checks the signature and the token's shape; what to
/// do about its age (`issuedAt`) is the caller's decision.
public final class ProviderTokenVerifier: Sendable {
    private let keys: [String: OpenSSLKey]

    /// - Parameter publicKeysByKeyID: `-----BEGIN PUBLIC KEY-----` PEM of each P-256 key, by Key ID.
    public init(publicKeysByKeyID: [String: String]) throws(CredentialError) {
        var keys: [String: OpenSSLKey] = [:]
        for (keyID, pem) in publicKeysByKeyID {
            let key = try OpenSSLKey.publicKey(fromPEM: Array(pem.utf8), what: "the public key for Key ID \(keyID)")
            guard key.isP256 else {
                throw CredentialError(
                    .unsupportedKeyType,
                    "the public key for Key ID \(keyID) is \(key.kindDescription); ES256 needs an EC P-256 key")
            }
            keys[keyID] = key
        }
        self.keys = keys
    }

    /// Trusts the public halves of the given signing keys.
    public init(trusting signingKeys: [ProviderTokenKey]) {
        keys = Dictionary(signingKeys.map { ($0.keyID, $0.key) }, uniquingKeysWith: { _, last in last })
    }

    /// The Key IDs this verifier knows.
    public var keyIDs: [String] { keys.keys.sorted() }

    /// Verifies a compact JWS (without the `bearer ` prefix).
    public func verify(_ token: some StringProtocol) throws(ProviderTokenVerificationError) -> VerifiedProviderToken {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count <= 4096 else { throw .malformed("the token is \(token.utf8.count) bytes, over 4096") }
        guard parts.count == 3 else {
            throw .malformed("a JWS has 3 base64url parts separated by '.', this has \(parts.count)")
        }
        guard let headerBytes = Base64URL.decode(parts[0]) else { throw .malformed("the header is not base64url") }
        guard let claimBytes = Base64URL.decode(parts[1]) else { throw .malformed("the claims are not base64url") }
        guard let signature = Base64URL.decode(parts[2]) else { throw .malformed("the signature is not base64url") }
        guard let header = try? JSONValue(parsing: headerBytes), case .object = header else {
            throw .malformed("the header is not a JSON object")
        }
        guard let claims = try? JSONValue(parsing: claimBytes), case .object = claims else {
            throw .malformed("the claims are not a JSON object")
        }
        guard let algorithm = header["alg"]?.stringValue else { throw .missingField("alg") }
        guard algorithm == "ES256" else { throw .unsupportedAlgorithm(algorithm) }
        guard let keyID = header["kid"]?.stringValue else { throw .missingField("kid") }
        guard let teamID = claims["iss"]?.stringValue else { throw .missingField("iss") }
        guard let issuedAt = claims["iat"]?.intValue else { throw .missingField("iat") }
        guard let key = keys[keyID] else { throw .unknownKeyID(keyID) }
        guard signature.count == 64 else {
            if signature.first == 0x30, (try? ECDSASignature.raw(fromDER: signature)) != nil {
                throw .derEncodedSignature
            }
            throw .invalidSignatureLength(signature.count)
        }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard let der = try? ECDSASignature.der(fromRaw: signature), key.verifySHA256(der, message: signingInput)
        else { throw .badSignature }
        return VerifiedProviderToken(keyID: keyID, teamID: teamID, issuedAt: issuedAt)
    }
}

/// What a valid provider token says.
public struct VerifiedProviderToken: Sendable, Hashable {
    /// The header's `kid`.
    public var keyID: String
    /// The claim `iss`.
    public var teamID: String
    /// The claim `iat`, UNIX seconds.
    public var issuedAt: Int64

    public init(keyID: String, teamID: String, issuedAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
    }
}

/// Why a provider token was refused.
public enum ProviderTokenVerificationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not three base64url parts of JSON objects; the text says which part.
    case malformed(String)
    /// A required header field or claim (`alg`, `kid`, `iss`, `iat`) is absent or has the wrong type.
    case missingField(String)
    /// `alg` is not ES256.
    case unsupportedAlgorithm(String)
    /// No public key is known for this `kid`.
    case unknownKeyID(String)
    /// The signature is DER-encoded; JWS wants the raw 64-byte `r || s`.
    case derEncodedSignature
    /// The signature is neither 64 raw bytes nor DER.
    case invalidSignatureLength(Int)
    /// The signature does not verify with the key of this `kid`.
    case badSignature

    public var description: String {
        switch self {
        case .malformed(let detail): "malformed token: \(detail)"
        case .missingField(let name): "the token has no valid '\(name)'"
        case .unsupportedAlgorithm(let algorithm): "alg is '\(algorithm)'; APNs accepts only ES256"
        case .unknownKeyID(let keyID): "no key is known for kid '\(keyID)'"
        case .derEncodedSignature: "the signature is DER; ES256 needs the raw 64-byte r||s"
        case .invalidSignatureLength(let count): "the signature is \(count) bytes; ES256 needs 64"
        case .badSignature: "the signature does not verify"
        }
    }
}
