// Opens a PKCS#12 archive and says precisely why it could not: PEM or a DER .cer instead of PKCS#12,
// damaged bytes, a missing or wrong password (checked with the MAC), a legacy cipher, no key.

import COpenSSL
import Synchronization

enum PKCS12Archive {
    struct Parts {
        var certificate: OpaquePointer
        var key: OpenSSLKey
        var chain: [OpaquePointer]
    }

    static func open(_ bytes: [UInt8], password: String?, source: String?) throws(CredentialError) -> Parts {
        let name = source.map { "'\($0)'" } ?? "the archive"
        if !PEMLabels(bytes).all.isEmpty {
            throw CredentialError(
                .notPKCS12,
                "\(name) is PEM text, not a PKCS#12 archive; pass it as a PEM certificate with its key, "
                    + "or convert it with 'openssl pkcs12 -export -in cert.pem -inkey key.pem -out cert.p12'",
                path: source)
        }
        OpenSSLErrorQueue.clear()
        let archive: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_PKCS12(nil, &cursor, buffer.count)
        }
        guard let archive else {
            OpenSSLErrorQueue.clear()
            if let subject = X509Text.derCertificateSubject(bytes) {
                throw CredentialError(
                    .certificateInsteadOfPKCS12,
                    "\(name) is a DER certificate (.cer) for '\(subject)', not a PKCS#12 archive, and holds no "
                        + "private key; export certificate and private key together as .p12 (Keychain Access: "
                        + "select both, Export), or pass the certificate converted to PEM with "
                        + "'openssl x509 -inform DER -in FILE -out cert.pem' plus its key file", path: source)
            }
            if bytes.first == 0x30 {
                throw CredentialError(
                    .corruptPKCS12,
                    "\(name) looks like DER but is not a readable PKCS#12 archive (truncated or "
                        + "damaged?); export it again", path: source)
            }
            throw CredentialError(
                .notPKCS12,
                "\(name) is not a PKCS#12 (.p12) archive (it is neither PEM nor DER); check that this "
                    + "is the right file", path: source)
        }
        defer { PKCS12_free(archive) }

        let usedPassword = try verifyPassword(archive, password: password, name: name, source: source)
        var parsed = parse(archive, password: usedPassword)
        if parsed == nil, loadLegacyProvider() {
            parsed = parse(archive, password: usedPassword)
        }
        guard let (certificate, key, chain) = parsed else {
            let reason = OpenSSLErrorQueue.summary()
            throw CredentialError(
                .corruptPKCS12,
                "\(name) could not be decrypted although its password is right (\(reason)); it may "
                    + "use a cipher this OpenSSL lacks: re-export it with 'openssl pkcs12 -legacy -in OLD -nodes | "
                    + "openssl pkcs12 -export -out NEW.p12'", path: source)
        }
        // Without a key, PKCS12_parse files every certificate under the chain; so check the key first.
        guard let key else {
            if let certificate { X509_free(certificate) }
            for extra in chain { X509_free(extra) }
            throw CredentialError(
                .missingPrivateKey,
                "\(name) holds a certificate but no private key; export certificate and "
                    + "private key together (Keychain Access: expand the certificate, select both, Export)",
                path: source)
        }
        guard let certificate else {
            EVP_PKEY_free(key)
            for extra in chain { X509_free(extra) }
            throw CredentialError(
                .missingCertificate,
                "\(name) holds a private key but no certificate matching it; export the push "
                    + "certificate together with its private key", path: source)
        }
        return Parts(certificate: certificate, key: OpenSSLKey(taking: key), chain: chain)
    }

    /// Checks the password against the archive's MAC, so a wrong password is told apart from damage.
    /// Returns the password to use (nil or "" for archives made without one).
    private static func verifyPassword(_ archive: OpaquePointer, password: String?, name: String, source: String?)
        throws(CredentialError) -> String?
    {
        guard PKCS12_mac_present(archive) == 1 else { return password }
        if let password, !password.isEmpty {
            let verified = password.withCString { PKCS12_verify_mac(archive, $0, -1) } == 1
            OpenSSLErrorQueue.clear()
            guard verified else {
                throw CredentialError(
                    .wrongPassword,
                    "the password for \(name) is wrong (the archive's integrity check fails with it); "
                        + "check the password file or environment variable", path: source)
            }
            return password
        }
        // Archives exported without a password use an empty or absent one.
        if PKCS12_verify_mac(archive, nil, 0) == 1 { return nil }
        if PKCS12_verify_mac(archive, "", 0) == 1 { return "" }
        OpenSSLErrorQueue.clear()
        throw CredentialError(
            .passwordRequired,
            "\(name) is protected by a password and none was given; pass it with "
                + "--password-file FILE or the APNS_CERT_PASSWORD environment variable", path: source)
    }

    private static func parse(_ archive: OpaquePointer, password: String?)
        -> (OpaquePointer?, OpaquePointer?, [OpaquePointer])?
    {
        var key: OpaquePointer?
        var certificate: OpaquePointer?
        var stack: OpaquePointer?
        let status = withOptionalCString(password) { PKCS12_parse(archive, $0, &key, &certificate, &stack) }
        guard status == 1 else { return nil }
        var chain: [OpaquePointer] = []
        if let stack {
            for index in 0..<OPENSSL_sk_num(stack) {
                if let item = OPENSSL_sk_value(stack, index) { chain.append(OpaquePointer(item)) }
            }
            OPENSSL_sk_free(stack)
        }
        return (certificate, key, chain)
    }

    private static func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let string else { return body(nil) }
        return string.withCString { body($0) }
    }

    private static let legacyProviderLoaded = Mutex(false)

    /// Loads OpenSSL's legacy provider once (RC2 and 3DES, used by older Keychain exports). The
    /// default provider stays active because the fallback is retained.
    private static func loadLegacyProvider() -> Bool {
        legacyProviderLoaded.withLock { loaded in
            if loaded { return false }
            loaded = OSSL_PROVIDER_try_load(nil, "legacy", 1) != nil
            OpenSSLErrorQueue.clear()
            return loaded
        }
    }
}
