// The one error type for loading and using APNs credentials (.p8 keys, certificates, PKCS#12).
// Every message says what went wrong, where, and how to fix it; none ever carries key material.

/// A credential could not be loaded or used.
///
/// Compare errors by `code`; `message` is for people and names the fix. Messages never contain key
/// material, passwords or tokens.
public struct CredentialError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. Compare with `==` against the static members.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable, Hashable {
            case fileNotFound, fileUnreadable, notPEM, notPKCS12, certificateInsteadOfPKCS12
            case wrongPassword, passwordRequired, corruptPKCS12, unsupportedKeyType, invalidKeyID, invalidTeamID
            case missingPrivateKey, missingCertificate, keyCertificateMismatch, certificateExpired
            case certificateNotYetValid, invalidConfiguration, signingFailed, tlsSetupFailed, invalidPublicKey
            case malformedSignature
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The file does not exist.
        public static let fileNotFound = Code(.fileNotFound)
        /// The file exists but could not be read (permissions, a directory, too large).
        public static let fileUnreadable = Code(.fileUnreadable)
        /// Expected PEM text (`-----BEGIN ...-----`) and found something else.
        public static let notPEM = Code(.notPEM)
        /// Expected a PKCS#12 (.p12/.pfx) archive and found something else.
        public static let notPKCS12 = Code(.notPKCS12)
        /// A DER certificate (.cer) was given where a PKCS#12 archive was expected.
        public static let certificateInsteadOfPKCS12 = Code(.certificateInsteadOfPKCS12)
        /// The PKCS#12 password (or encrypted PEM key password) is wrong.
        public static let wrongPassword = Code(.wrongPassword)
        /// The key or archive is encrypted and no password was given.
        public static let passwordRequired = Code(.passwordRequired)
        /// The PKCS#12 archive is damaged (its structure does not parse).
        public static let corruptPKCS12 = Code(.corruptPKCS12)
        /// The key is not the kind required (APNs provider tokens need EC P-256).
        public static let unsupportedKeyType = Code(.unsupportedKeyType)
        /// The Key ID is not 10 uppercase letters or digits.
        public static let invalidKeyID = Code(.invalidKeyID)
        /// The Team ID is not 10 uppercase letters or digits.
        public static let invalidTeamID = Code(.invalidTeamID)
        /// A certificate was found but no private key.
        public static let missingPrivateKey = Code(.missingPrivateKey)
        /// A key was found but no certificate.
        public static let missingCertificate = Code(.missingCertificate)
        /// The private key does not belong to the certificate.
        public static let keyCertificateMismatch = Code(.keyCertificateMismatch)
        /// The certificate's not-after date has passed.
        public static let certificateExpired = Code(.certificateExpired)
        /// The certificate's not-before date is in the future.
        public static let certificateNotYetValid = Code(.certificateNotYetValid)
        /// A setting (such as a token refresh age) is out of range.
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// OpenSSL failed to sign.
        public static let signingFailed = Code(.signingFailed)
        /// OpenSSL refused the identity when installing it into a TLS context.
        public static let tlsSetupFailed = Code(.tlsSetupFailed)
        /// A public key (for token verification) could not be loaded.
        public static let invalidPublicKey = Code(.invalidPublicKey)
        /// An ECDSA signature is not well-formed DER or not 64 raw bytes.
        public static let malformedSignature = Code(.malformedSignature)

        public var description: String { value.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong and how to fix it.
    public var message: String
    /// The file involved, when there is one (the message names it too).
    public var path: String?

    public init(_ code: Code, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    public var description: String { message }

    public static func == (lhs: CredentialError, rhs: CredentialError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
