// An APNs client certificate with its private key and chain, loaded from PKCS#12 or PEM, checked,
// described (subject, validity, topics, environments), and installable into an OpenSSL SSL_CTX.

import COpenSSL
public import Foundation

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

    /// Takes ownership of `certificate` and `chain` (freed in `deinit`, also when this throws).
    init(certificate: OpaquePointer, key: OpenSSLKey, chain: [OpaquePointer], source: String?, now: Date)
        throws(CredentialError)
    {
        self.certificate = certificate
        self.key = key
        self.chain = chain
        subject = X509Text.name(X509_get_subject_name(certificate))
        issuer = X509Text.name(X509_get_issuer_name(certificate))
        commonName = X509Text.entry(X509_get_subject_name(certificate), nid: NID_commonName)
        notBefore = X509Text.date(X509_get0_notBefore(certificate)) ?? Date.distantPast
        notAfter = X509Text.date(X509_get0_notAfter(certificate)) ?? Date.distantPast

        var warnings: [String] = []
        var environments: CertificateEnvironments = []
        if X509Text.extensionValue(certificate, oid: ApplePushCertificateExtensions.sandboxOID) != nil {
            environments.insert(.sandbox)
        }
        if X509Text.extensionValue(certificate, oid: ApplePushCertificateExtensions.productionOID) != nil {
            environments.insert(.production)
        }
        self.environments = environments

        var topics: [String] = []
        if let value = X509Text.extensionValue(certificate, oid: ApplePushCertificateExtensions.topicsOID) {
            if let parsed = ApplePushCertificateExtensions.topics(fromExtensionValue: value) {
                topics = parsed
            } else {
                warnings.append(
                    "the certificate's topics extension (\(ApplePushCertificateExtensions.topicsOID)) "
                        + "is malformed and was ignored; the subject's UID is used instead")
            }
        }
        if topics.isEmpty, let uid = X509Text.entry(X509_get_subject_name(certificate), nid: NID_userId) {
            topics = [uid]
        }
        if topics.isEmpty {
            warnings.append(
                "the certificate names no topic (no Apple topics extension and no UID in its subject); "
                    + "is this an Apple Push Services certificate?")
        }
        self.topics = topics

        let selfIssued = X509_check_issued(certificate, certificate) == X509_V_OK
        let hasIssuer = chain.contains { X509_check_issued($0, certificate) == X509_V_OK }
        if !selfIssued && !hasIssuer {
            warnings.append(
                "the chain lacks the intermediate that issued this certificate (\(issuer)); include it "
                    + "in the .p12 or PEM file (for Apple certificates: 'Apple Worldwide Developer Relations "
                    + "Certification Authority'), otherwise the server may refuse the client certificate")
        }
        self.warnings = warnings
        OpenSSLErrorQueue.clear()

        let subject = source.map { "'\($0)'" } ?? "the certificate"
        guard X509_check_private_key(certificate, key.pointer) == 1 else {
            OpenSSLErrorQueue.clear()
            throw CredentialError(
                .keyCertificateMismatch,
                "the private key does not belong to the certificate in \(subject) (\(self.subject)): its public "
                    + "key differs. Use the key the certificate request was made with, or export certificate "
                    + "and key together as a .p12", path: source)
        }
        let day = X509Text.day
        if now < notBefore {
            throw CredentialError(
                .certificateNotYetValid,
                "the certificate in \(subject) (\(self.subject)) is not valid yet: it starts on "
                    + "\(day(notBefore)); check the system clock, or wait", path: source)
        }
        if now > notAfter {
            let daysAgo = Int(now.timeIntervalSince(notAfter) / 86_400)
            throw CredentialError(
                .certificateExpired,
                "the certificate in \(subject) (\(self.subject)) expired on \(day(notAfter)), \(daysAgo) days "
                    + "ago; create a new Apple Push Notification service certificate in Certificates, "
                    + "Identifiers & Profiles (or switch to token auth with a .p8 key)", path: source)
        }
    }

    deinit {
        X509_free(certificate)
        for extra in chain { X509_free(extra) }
    }

    /// Loads a certificate file, PKCS#12 or PEM (told apart by content), with an optional separate
    /// PEM key file.
    /// - Parameters:
    ///   - password: the PKCS#12 password, or the password of an encrypted PEM key.
    ///   - now: the time at which validity is checked.
    public convenience init(
        certificateFile: String, keyFile: String? = nil, password: String? = nil,
        now: Date = Date()
    ) throws(CredentialError) {
        let certificateBytes = try CredentialFile.read(certificateFile, what: "certificate")
        let keyBytes = try keyFile.map { path throws(CredentialError) in
            try CredentialFile.read(path, what: "PEM private key")
        }
        if PEMLabels(certificateBytes).all.isEmpty && keyFile == nil {
            try self.init(pkcs12: certificateBytes, password: password, source: certificateFile, now: now)
        } else {
            try self.init(
                certificatePEM: certificateBytes, keyPEM: keyBytes, password: password,
                certificateSource: certificateFile, keySource: keyFile, now: now)
        }
    }

    /// Loads a PKCS#12 (.p12/.pfx) file.
    public convenience init(pkcs12File path: String, password: String?, now: Date = Date()) throws(CredentialError) {
        let bytes = try CredentialFile.read(path, what: "PKCS#12 certificate (.p12)")
        try self.init(pkcs12: bytes, password: password, source: path, now: now)
    }

    /// Parses PKCS#12 bytes: certificate, private key and chain.
    /// - Parameter source: the file name to mention in errors, if any.
    public convenience init(pkcs12 bytes: [UInt8], password: String?, source: String? = nil, now: Date = Date())
        throws(CredentialError)
    {
        let parts = try PKCS12Archive.open(bytes, password: password, source: source)
        try self.init(certificate: parts.certificate, key: parts.key, chain: parts.chain, source: source, now: now)
    }

    /// Parses a PEM certificate (the first `CERTIFICATE` block, followed by its chain) and a PEM private
    /// key; without `keyPEM` the key is looked for in `certificatePEM`.
    public convenience init(
        certificatePEM: [UInt8], keyPEM: [UInt8]?, password: String? = nil,
        certificateSource: String? = nil, keySource: String? = nil, now: Date = Date()
    )
        throws(CredentialError)
    {
        let name = certificateSource.map { "'\($0)'" } ?? "the certificate"
        let labels = PEMLabels(certificatePEM)
        guard !labels.all.isEmpty else {
            if X509Text.isDERCertificate(certificatePEM) {
                throw CredentialError(
                    .notPEM,
                    "\(name) is a DER (binary) certificate, not PEM; convert it with 'openssl x509 -inform "
                        + "DER -in FILE -out cert.pem' and pass the key too", path: certificateSource)
            }
            throw CredentialError(
                .notPEM,
                PEMLabels.notPEMMessage(
                    certificatePEM, subject: name,
                    expected: "CERTIFICATE"), path: certificateSource)
        }
        var certificates = X509Text.readPEMCertificates(certificatePEM)
        guard !certificates.isEmpty else {
            throw CredentialError(
                .missingCertificate,
                "\(name) holds \(labels.all.joined(separator: ", ")) but no certificate; "
                    + "expected a '-----BEGIN CERTIFICATE-----' block", path: certificateSource)
        }
        let leaf = certificates.removeFirst()
        let key: OpenSSLKey
        do throws(CredentialError) {
            if let keyPEM {
                key = try OpenSSLKey.privateKey(fromPEM: keyPEM, password: password, source: keySource)
            } else if labels.hasPrivateKey {
                key = try OpenSSLKey.privateKey(fromPEM: certificatePEM, password: password, source: certificateSource)
            } else {
                throw CredentialError(
                    .missingPrivateKey,
                    "\(name) holds a certificate but no private key; pass the key file too "
                        + "(--key-file), or use a .p12 that holds both", path: certificateSource)
            }
        } catch {
            X509_free(leaf)
            for extra in certificates { X509_free(extra) }
            throw error
        }
        try self.init(certificate: leaf, key: key, chain: certificates, source: certificateSource, now: now)
    }

    /// Whole days until `notAfter` (negative once expired).
    public func daysLeft(at now: Date = Date()) -> Int {
        Int((notAfter.timeIntervalSince(now) / 86_400).rounded(.down))
    }

    /// Installs certificate, key and chain into an `SSL_CTX*` for mutual TLS, then checks that the key
    /// matches. Replaces any certificate, key and chain the context had.
    /// - Important: call before the context creates connections; an `SSL_CTX` must not be changed
    ///   while connections use it.
    public func install(into sslContext: OpaquePointer) throws(CredentialError) {
        OpenSSLErrorQueue.clear()
        guard SSL_CTX_use_certificate(sslContext, certificate) == 1 else {
            throw CredentialError(
                .tlsSetupFailed, "OpenSSL refused the client certificate: \(OpenSSLErrorQueue.summary())")
        }
        guard SSL_CTX_use_PrivateKey(sslContext, key.pointer) == 1 else {
            throw CredentialError(.tlsSetupFailed, "OpenSSL refused the private key: \(OpenSSLErrorQueue.summary())")
        }
        // SSL_CTX_clear_chain_certs and SSL_CTX_add1_chain_cert are macros over SSL_CTX_ctrl.
        _ = SSL_CTX_ctrl(sslContext, SSL_CTRL_CHAIN, 0, nil)
        for extra in chain {
            guard SSL_CTX_ctrl(sslContext, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(extra)) == 1 else {
                throw CredentialError(
                    .tlsSetupFailed, "OpenSSL refused a chain certificate: \(OpenSSLErrorQueue.summary())")
            }
        }
        guard SSL_CTX_check_private_key(sslContext) == 1 else {
            throw CredentialError(
                .tlsSetupFailed, "the TLS context's key does not match its certificate: \(OpenSSLErrorQueue.summary())")
        }
    }

    public var description: String {
        "CertificateIdentity(subject: \(subject), notAfter: \(notAfter))"
    }
}
