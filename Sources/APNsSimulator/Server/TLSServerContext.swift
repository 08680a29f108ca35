// The simulator's TLS side: an OpenSSL server context that speaks only h2 (ALPN), TLS 1.2+, with
// either given cert/key files or a self-signed EC P-256 certificate generated at start-up, and
// optionally requiring client certificates signed by a configured CA (certificate authentication).

import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Owns an `SSL_CTX`; creates one `SSL` per accepted connection.
/// - Important: immutable after init; `makeSession` may be called from any thread.
final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer
    /// PEM of the certificate clients should trust (the generated certificate, or nil when files were given).
    let generatedCertificatePEM: String?

    /// Where the server certificate comes from.
    enum Identity {
        /// Generate a self-signed EC P-256 certificate for localhost and 127.0.0.1.
        case generated(hosts: [String])
        /// PEM files: certificate (chain) and private key.
        case files(certificate: String, privateKey: String)
    }

    init(identity: Identity, clientCertificateCAFile: String?) throws(SimulatorError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw SimulatorError(.tls, "SSL_CTX_new failed: \(TLSServerContext.openSSLErrors())")
        }
        self.context = context
        var generated: String?
        do throws(SimulatorError) {
            _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
            // SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION: the macros
            // (SSL_OP_BIT) do not import into Swift.
            _ = SSL_CTX_set_options(context, (1 << 17) | (1 << 22) | (1 << 30))
            _ = SSL_CTX_ctrl(
                context, SSL_CTRL_MODE,
                Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS),
                nil)
            SSL_CTX_set_alpn_select_cb(
                context,
                { _, out, outLength, input, inputLength, _ in
                    TLSServerContext.selectH2(out, outLength, input, inputLength)
                }, nil)
            switch identity {
            case .generated(let hosts):
                generated = try Self.installGeneratedCertificate(context, hosts: hosts)
            case .files(let certificate, let privateKey):
                try Self.installFiles(context, certificate: certificate, privateKey: privateKey)
            }
            if let caFile = clientCertificateCAFile {
                guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                    throw SimulatorError(
                        .tls,
                        "cannot load client CA file \(caFile): \(TLSServerContext.openSSLErrors())")
                }
                if let names = SSL_load_client_CA_file(caFile) { SSL_CTX_set_client_CA_list(context, names) }
                SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        generatedCertificatePEM = generated
    }

    deinit { SSL_CTX_free(context) }

    /// A new server-side `SSL` for one connection; the caller frees it.
    func makeSession() -> OpaquePointer? { SSL_new(context) }

    /// ALPN: pick "h2" from the client's list; a client without h2 is refused (APNs speaks only HTTP/2).
    private static func selectH2(
        _ out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ outLength: UnsafeMutablePointer<UInt8>?,
        _ input: UnsafePointer<UInt8>?, _ inputLength: UInt32
    ) -> Int32 {
        guard let input, let out, let outLength else { return SSL_TLSEXT_ERR_ALERT_FATAL }
        var index = 0
        let count = Int(inputLength)
        while index < count {
            let length = Int(input[index])
            if length == 2, index + 2 < count, input[index + 1] == UInt8(ascii: "h"),
                input[index + 2] == UInt8(ascii: "2")
            {
                out.pointee = input + index + 1
                outLength.pointee = 2
                return SSL_TLSEXT_ERR_OK
            }
            index += 1 + length
        }
        return SSL_TLSEXT_ERR_ALERT_FATAL
    }

    private static func installFiles(_ context: OpaquePointer, certificate: String, privateKey: String)
        throws(SimulatorError)
    {
        guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
            throw SimulatorError(.tls, "cannot load certificate file \(certificate): \(openSSLErrors())")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKey, SSL_FILETYPE_PEM) == 1 else {
            throw SimulatorError(.tls, "cannot load private key file \(privateKey): \(openSSLErrors())")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw SimulatorError(.tls, "private key \(privateKey) does not match certificate \(certificate)")
        }
    }

    /// Generates an EC P-256 key and a self-signed certificate valid for `hosts` (DNS names or IPs),
    /// installs both, and returns the certificate's PEM.
    private static func installGeneratedCertificate(_ context: OpaquePointer, hosts: [String])
        throws(SimulatorError) -> String
    {
        guard let keyContext = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else {
            throw SimulatorError(.tls, "EVP_PKEY_CTX_new_id failed: \(openSSLErrors())")
        }
        defer { EVP_PKEY_CTX_free(keyContext) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(keyContext) == 1,
            EVP_PKEY_CTX_set_ec_paramgen_curve_nid(keyContext, NID_X9_62_prime256v1) == 1,
            EVP_PKEY_keygen(keyContext, &key) == 1, let key
        else {
            throw SimulatorError(.tls, "cannot generate an EC P-256 key: \(openSSLErrors())")
        }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw SimulatorError(.tls, "X509_new failed") }
        defer { X509_free(certificate) }

        var serial: UInt32 = 0
        _ = withUnsafeMutableBytes(of: &serial) { RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 4) }
        X509_set_version(certificate, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(certificate), Int(serial & 0x7fff_ffff) | 1)
        X509_gmtime_adj(X509_getm_notBefore(certificate), -3600)
        X509_gmtime_adj(X509_getm_notAfter(certificate), 30 * 24 * 3600)
        X509_set_pubkey(certificate, key)
        let name = X509_get_subject_name(certificate)
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "apns-worker simulator", -1, -1, 0)
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, hosts.first ?? "localhost", -1, -1, 0)
        X509_set_issuer_name(certificate, name)

        let alternativeNames = hosts.map { host in
            Self.isIPAddress(host) ? "IP:\(host)" : "DNS:\(host)"
        }.joined(separator: ",")
        // The same extensions `openssl req -x509` writes, so strict verifiers accept the certificate
        // both as the trust anchor and as the server's leaf.
        let extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:TRUE"),
            (NID_subject_key_identifier, "hash"),
            (NID_authority_key_identifier, "keyid:always"),
            (NID_key_usage, "critical,digitalSignature,keyCertSign"),
            (NID_ext_key_usage, "serverAuth"),
            (NID_subject_alt_name, alternativeNames),
        ]
        var extensionContext = X509V3_CTX()
        X509V3_set_ctx(&extensionContext, certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &extensionContext, nid, value) else {
                throw SimulatorError(.tls, "cannot build certificate extension \(value): \(openSSLErrors())")
            }
            X509_add_ext(certificate, ext, -1)
            X509_EXTENSION_free(ext)
        }
        guard X509_sign(certificate, key, EVP_sha256()) > 0 else {
            throw SimulatorError(.tls, "cannot sign the generated certificate: \(openSSLErrors())")
        }
        guard SSL_CTX_use_certificate(context, certificate) == 1, SSL_CTX_use_PrivateKey(context, key) == 1 else {
            throw SimulatorError(.tls, "cannot install the generated certificate: \(openSSLErrors())")
        }
        return try pem(of: certificate)
    }

    private static func pem(of certificate: OpaquePointer) throws(SimulatorError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw SimulatorError(.tls, "BIO_new failed") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, certificate) == 1 else {
            throw SimulatorError(.tls, "cannot write certificate PEM: \(openSSLErrors())")
        }
        var pointer: UnsafeMutablePointer<CChar>?
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
        guard length > 0, let pointer else { throw SimulatorError(.tls, "empty certificate PEM") }
        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// Drains OpenSSL's error queue into one line.
    static func openSSLErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return messages.isEmpty ? "no OpenSSL error recorded" : messages.joined(separator: "; ")
    }
}
