// An APNs client certificate with its private key and chain, loaded from PKCS#12 or PEM, checked,
// described (subject, validity, topics, environments), and installable into an OpenSSL SSL_CTX.
public import Foundation
import COpenSSL

/// The environments a push certificate may connect to.
public struct CertificateEnvironments: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Development (api.sandbox.push.apple.com); Apple's OID 1.2.840.113635.100.6.3.1.
    public static let sandbox = CertificateEnvironments(rawValue: 1)
    /// Production (api.push.apple.com); Apple's OID 1.2.840.113635.100.6.3.2.
    public static let production = CertificateEnvironments(rawValue: 2)

    public var description: String {
        switch self {
        case [.sandbox, .production]: "sandbox and production"
        case .sandbox: "sandbox"
        case .production: "production"
        default: "unknown"
        }
    }
}

/// A client certificate, its private key and its chain, for APNs certificate (mutual TLS) auth.
///
/// Immutable and safe to share between threads; `install(into:)` may be called for many contexts.
/// `description` shows the subject and expiry, never key material.
public final class CertificateIdentity: @unchecked Sendable, CustomStringConvertible {
    /// The subject in one line, RFC 2253 style ("UID=com.example.app,CN=Apple Push Services: ...").
    public let subject: String
    /// The subject's common name, if any.
    public let commonName: String?
    /// The issuer in one line.
    public let issuer: String
    /// Start of validity.
    public let notBefore: Date
    /// End of validity.
    public let notAfter: Date
    /// The topics (bundle ids and their suffixed forms) the certificate may push to: from Apple's
    /// topics extension, or else the subject's UID. Empty when the certificate names none.
    public let topics: [String]
    /// Which APNs environments the certificate is for; empty when it does not say.
    public let environments: CertificateEnvironments
    /// Problems that do not stop loading but should be fixed (e.g. a missing intermediate).
    public let warnings: [String]
    /// How many extra chain certificates came with the leaf.
    public var chainCount: Int { chain.count }

    let certificate: OpaquePointer
    let key: OpenSSLKey
    let chain: [OpaquePointer]

    init(certificate: OpaquePointer, key: OpenSSLKey, chain: [OpaquePointer], now: Date) throws(CredentialError) {
        throw CredentialError(.missingCertificate, "not implemented yet")
    }

    deinit {
        X509_free(certificate)
        for extra in chain { X509_free(extra) }
    }

    /// Loads a PKCS#12 (.p12/.pfx) file.
    /// - Parameter now: the time at which validity is checked.
    public convenience init(pkcs12File path: String, password: String?, now: Date = Date()) throws(CredentialError) {
        let bytes = try CredentialFile.read(path, what: "PKCS#12 certificate (.p12)")
        try self.init(pkcs12: bytes, password: password, source: path, now: now)
    }

    /// Parses PKCS#12 bytes.
    public convenience init(pkcs12 bytes: [UInt8], password: String?, source: String? = nil, now: Date = Date())
        throws(CredentialError)
    {
        throw CredentialError(.notPKCS12, "not implemented yet", path: source)
    }

    /// Loads a PEM certificate (with its chain) and a PEM private key; the key may be in the
    /// certificate file (`keyFile` nil).
    public convenience init(certificateFile: String, keyFile: String? = nil, password: String? = nil,
                            now: Date = Date()) throws(CredentialError)
    {
        let certificateBytes = try CredentialFile.read(certificateFile, what: "PEM certificate")
        let keyBytes = try keyFile.map { path throws(CredentialError) in
            try CredentialFile.read(path, what: "PEM private key")
        }
        try self.init(certificatePEM: certificateBytes, keyPEM: keyBytes, password: password,
                      certificateSource: certificateFile, keySource: keyFile, now: now)
    }

    /// Parses a PEM certificate chain and a PEM private key (or finds the key among `certificatePEM`).
    public convenience init(certificatePEM: [UInt8], keyPEM: [UInt8]?, password: String? = nil,
                            certificateSource: String? = nil, keySource: String? = nil, now: Date = Date())
        throws(CredentialError)
    {
        throw CredentialError(.notPEM, "not implemented yet", path: certificateSource)
    }

    /// Whole days until `notAfter` (negative once expired).
    public func daysLeft(at now: Date = Date()) -> Int {
        Int((notAfter.timeIntervalSince(now) / 86_400).rounded(.down))
    }

    /// Installs certificate, key and chain into an `SSL_CTX*` for mutual TLS, and checks the key.
    /// - Important: call before the context creates connections; OpenSSL contexts are not safe to
    ///   modify while in use.
    public func install(into sslContext: OpaquePointer) throws(CredentialError) {
        throw CredentialError(.tlsSetupFailed, "not implemented yet")
    }

    public var description: String {
        "CertificateIdentity(subject: \(subject), notAfter: \(notAfter))"
    }
}
