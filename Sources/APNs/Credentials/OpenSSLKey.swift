// Owns an OpenSSL EVP_PKEY and does the few things credentials need with it: parse PEM (telling
// apart the ways a key file can be wrong), sign and verify ECDSA SHA-256, export the public half.

import COpenSSL

/// An `EVP_PKEY` owned by exactly one object, freed in `deinit`.
///
/// Immutable after creation; OpenSSL 3 allows concurrent use of one key from several threads as
/// long as each operation uses its own context, as every method here does.
final class OpenSSLKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// Parses a private key from PEM, with a message naming the fix for each way it can go wrong.
    static func privateKey(fromPEM bytes: [UInt8], password: String?, source: String?) throws(CredentialError)
        -> OpenSSLKey
    {
        let labels = PEMLabels(bytes)
        let subject = source.map { "'\($0)'" } ?? "the key"
        guard !labels.all.isEmpty else {
            throw CredentialError(
                .notPEM, PEMLabels.notPEMMessage(bytes, subject: subject, expected: "PRIVATE KEY"),
                path: source)
        }
        guard labels.hasPrivateKey else {
            throw CredentialError(
                .missingPrivateKey,
                "\(subject) holds \(labels.all.joined(separator: ", ")) but no private key; "
                    + "expected a '-----BEGIN PRIVATE KEY-----' block", path: source)
        }
        if labels.isEncrypted && (password ?? "").isEmpty {
            throw CredentialError(
                .passwordRequired,
                "\(subject) is an encrypted private key and no password was given; pass the password from a file "
                    + "or the environment, or decrypt the key once with 'openssl pkey -in KEY -out KEY.decrypted'",
                path: source)
        }
        OpenSSLErrorQueue.clear()
        let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            if let password {
                return password.withCString {
                    PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0))
                }
            }
            // A callback that supplies no password, so OpenSSL never prompts on the terminal.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else {
            let reasons = OpenSSLErrorQueue.drain()
            if labels.isEncrypted || reasons.contains(where: { $0.contains("bad decrypt") }) {
                throw CredentialError(
                    .wrongPassword, "could not decrypt \(subject): the password is wrong", path: source)
            }
            throw CredentialError(
                .notPEM,
                "\(subject) has a private-key PEM block that OpenSSL cannot read (\(reasons.last ?? "no detail")); "
                    + "the file may be truncated or edited — download or export it again", path: source)
        }
        return OpenSSLKey(taking: key)
    }

    /// Parses a public key (`-----BEGIN PUBLIC KEY-----`).
    static func publicKey(fromPEM bytes: [UInt8], what: String) throws(CredentialError) -> OpenSSLKey {
        OpenSSLErrorQueue.clear()
        let key: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let key else {
            let reason = OpenSSLErrorQueue.drain().last ?? "no PEM block found"
            throw CredentialError(
                .invalidPublicKey,
                "\(what) is not a PEM public key ('-----BEGIN PUBLIC KEY-----'): \(reason); "
                    + "make one with 'openssl pkey -in key.p8 -pubout'")
        }
        return OpenSSLKey(taking: key)
    }

    static func generateP256() throws(CredentialError) -> OpenSSLKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CredentialError(
                .signingFailed, "OpenSSL cannot create an EC key context: \(OpenSSLErrorQueue.summary())")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else {
            throw CredentialError(
                .signingFailed, "OpenSSL could not generate a P-256 key: \(OpenSSLErrorQueue.summary())")
        }
        return OpenSSLKey(taking: key)
    }

    /// The algorithm and size in words, e.g. "an RSA key (2048 bits)" or "an EC key on curve secp384r1".
    var kindDescription: String {
        switch EVP_PKEY_get_base_id(pointer) {
        case EVP_PKEY_EC: return "an EC key on curve \(curveName ?? "unknown")"
        case EVP_PKEY_RSA: return "an RSA key (\(EVP_PKEY_get_bits(pointer)) bits)"
        case EVP_PKEY_ED25519: return "an Ed25519 key"
        case EVP_PKEY_DSA: return "a DSA key"
        default: return "a key of OpenSSL type \(EVP_PKEY_get_base_id(pointer))"
        }
    }

    /// The EC curve's short name ("prime256v1"), or nil for other key types.
    var curveName: String? {
        guard EVP_PKEY_get_base_id(pointer) == EVP_PKEY_EC else { return nil }
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, OSSL_PKEY_PARAM_GROUP_NAME, &buffer, buffer.count, &length) == 1
        else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    var isP256: Bool { curveName == "prime256v1" || curveName == "P-256" }

    func requireP256(source: String?, role: String) throws(CredentialError) {
        guard !isP256 else { return }
        let subject = source.map { "'\($0)'" } ?? "the key"
        throw CredentialError(
            .unsupportedKeyType,
            "\(subject) is \(kindDescription), but an \(role) must be an EC P-256 (prime256v1) key; "
                + "create a key under Certificates, Identifiers & Profiles > Keys with APNs enabled and "
                + "use the .p8 file Apple gives you", path: source)
    }

    /// Signs with SHA-256; returns OpenSSL's DER signature (for EC keys, an `ECDSA-Sig-Value`).
    func signSHA256(_ message: [UInt8]) throws(CredentialError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else {
            throw CredentialError(.signingFailed, "OpenSSL could not allocate a digest context")
        }
        defer { EVP_MD_CTX_free(context) }
        var signature = [UInt8](repeating: 0, count: Int(max(EVP_PKEY_get_size(pointer), 0)))
        var length = signature.count
        let status = message.withUnsafeBufferPointer { input in
            guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { return Int32(0) }
            return EVP_DigestSign(context, &signature, &length, input.baseAddress, input.count)
        }
        guard status == 1, length <= signature.count else {
            throw CredentialError(.signingFailed, "OpenSSL could not sign: \(OpenSSLErrorQueue.summary())")
        }
        return Array(signature.prefix(length))
    }

    /// Verifies a DER signature over `message` with SHA-256.
    func verifySHA256(_ signature: [UInt8], message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            OpenSSLErrorQueue.clear()
            return false
        }
        let status = EVP_DigestVerify(context, signature, signature.count, message, message.count)
        OpenSSLErrorQueue.clear()
        return status == 1
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the form of Apple's .p8 files.
    var privateKeyPEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PKCS8PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 else { return "" }
        return OpenSSLBIO.string(from: bio)
    }

    /// The public half as `-----BEGIN PUBLIC KEY-----` PEM.
    var publicKeyPEM: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, pointer) == 1 else { return "" }
        return OpenSSLBIO.string(from: bio)
    }
}

/// The labels of a PEM file's blocks (`-----BEGIN <label>-----`), to tell what a file holds.
struct PEMLabels {
    let all: [String]
    let isEncrypted: Bool

    init(_ bytes: [UInt8]) {
        // Scanning bytes keeps binary input (DER) from being decoded as text.
        let marker = Array("-----BEGIN ".utf8)
        var labels: [String] = []
        var index = 0
        while index + marker.count <= bytes.count {
            if bytes[index] == marker[0], Array(bytes[index..<index + marker.count]) == marker {
                let start = index + marker.count
                var end = start
                while end < bytes.count, end - start < 64, bytes[end] != UInt8(ascii: "-") { end += 1 }
                labels.append(String(decoding: bytes[start..<end], as: UTF8.self))
                index = end
            } else {
                index += 1
            }
        }
        all = labels
        let procTypeEncrypted = Array("Proc-Type: 4,ENCRYPTED".utf8)
        isEncrypted =
            labels.contains("ENCRYPTED PRIVATE KEY")
            || (bytes.count >= procTypeEncrypted.count
                && (0...(bytes.count - procTypeEncrypted.count)).contains { offset in
                    bytes[offset] == procTypeEncrypted[0]
                        && Array(bytes[offset..<offset + procTypeEncrypted.count]) == procTypeEncrypted
                })
    }

    var hasPrivateKey: Bool { all.contains { $0.hasSuffix("PRIVATE KEY") } }
    var hasCertificate: Bool { all.contains { $0 == "CERTIFICATE" || $0 == "TRUSTED CERTIFICATE" } }

    /// Explains a file with no PEM block: binary DER, or text of some other kind.
    static func notPEMMessage(_ bytes: [UInt8], subject: String, expected: String) -> String {
        if bytes.isEmpty { return "\(subject) is empty; expected a '-----BEGIN \(expected)-----' PEM block" }
        if bytes.first == 0x30 {
            let convert =
                expected == "CERTIFICATE"
                ? "'openssl x509 -inform DER -in FILE -out FILE.pem'"
                : "'openssl pkey -inform DER -in FILE -out FILE.pem'"
            return "\(subject) is binary DER, not PEM text; expected a '-----BEGIN \(expected)-----' block. "
                + "Convert it with \(convert)"
        }
        return "\(subject) is not PEM: no '-----BEGIN \(expected)-----' line found; "
            + "check that this is the right file"
    }
}

/// Reading OpenSSL's thread-local error queue into words.
enum OpenSSLErrorQueue {
    static func clear() { ERR_clear_error() }

    /// Takes every queued error (oldest first) and empties the queue.
    static func drain() -> [String] {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let length = buffer.firstIndex(of: 0) ?? buffer.count
            messages.append(String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages
    }

    /// The queued errors in one line, emptying the queue.
    static func summary() -> String {
        let messages = drain()
        return messages.isEmpty ? "no detail from OpenSSL" : messages.joined(separator: "; ")
    }
}

enum OpenSSLBIO {
    /// Everything written to a memory BIO, as text.
    static func string(from bio: OpaquePointer) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var output: [UInt8] = []
        while true {
            let count = BIO_read(bio, &buffer, Int32(buffer.count))
            if count <= 0 { break }
            output.append(contentsOf: buffer.prefix(Int(count)))
        }
        return String(decoding: output, as: UTF8.self)
    }
}
