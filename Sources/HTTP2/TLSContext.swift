// TLS for HTTP/2 clients: the public configuration, and the OpenSSL SSL_CTX built from it once per pool
// (trust roots, TLS 1.2 minimum, ALPN h2, client identity) plus the per-connection SSL setup (SNI, host check).

import COpenSSL
import Glibc

/// How a pool's connections authenticate the server and, optionally, themselves.
public struct TLSConfiguration: Sendable {
    /// Where trusted certificate authorities come from.
    public enum TrustRoots: Sendable, Hashable {
        /// The system trust store (OpenSSL's default verify paths). Use this for Apple.
        case systemDefault
        /// Only the CA certificates in this PEM file; for test servers.
        case caFile(String)
    }

    /// Default: `.systemDefault`.
    public var trustRoots: TrustRoots
    /// The name sent as SNI and checked against the certificate; default (nil): the endpoint's host.
    /// An IP address is checked against the certificate's IP SANs and sent without SNI.
    public var serverName: String?
    /// Installs a client certificate and key into the `SSL_CTX*` for mutual TLS; nil for none.
    /// Called once, when the pool is created; a thrown error fails pool creation.
    public var installClientIdentity: (@Sendable (OpaquePointer) throws -> Void)?

    public init(
        trustRoots: TrustRoots = .systemDefault, serverName: String? = nil,
        installClientIdentity: (@Sendable (OpaquePointer) throws -> Void)? = nil
    ) {
        self.trustRoots = trustRoots
        self.serverName = serverName
        self.installClientIdentity = installClientIdentity
    }
}

/// An OpenSSL client `SSL_CTX`, configured once and shared by a pool's connections.
///
/// - Important: after `init` the context is only read (by `SSL_new`), which OpenSSL allows from any thread.
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    /// The name to verify and send as SNI.
    let serverName: String
    /// "the system trust store" or "the CA file '…'", for error messages.
    let trustDescription: String
    private let serverNameIsIPAddress: Bool

    init(configuration: TLSConfiguration, host: String, endpoint: String) throws(HTTP2ClientError) {
        var name = configuration.serverName ?? host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        serverName = name
        serverNameIsIPAddress = IPAddress.isLiteral(name)
        switch configuration.trustRoots {
        case .systemDefault: trustDescription = "the system trust store"
        case .caFile(let path): trustDescription = "the CA file '\(path)'"
        }
        // Built completely before it is stored: once every property is set, a throwing init runs deinit.
        context = try Self.makeContext(configuration, endpoint: endpoint)
    }

    private static func makeContext(_ configuration: TLSConfiguration, endpoint: String)
        throws(HTTP2ClientError) -> OpaquePointer
    {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw HTTP2ClientError(
                .invalidConfiguration, "cannot create a TLS context: \(OpenSSLError.drain())",
                endpoint: endpoint)
        }
        func fail(_ message: String) -> HTTP2ClientError {
            SSL_CTX_free(context)
            return HTTP2ClientError(.invalidConfiguration, message, endpoint: endpoint)
        }
        SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        // Partial writes let one SSL_write carry a whole batch of frames on a non-blocking socket;
        // read-ahead lets one read() fetch many TLS records.
        let modes = SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
        SSL_CTX_ctrl(context, SSL_CTRL_MODE, Int(modes), nil)
        SSL_CTX_ctrl(context, SSL_CTRL_SET_READ_AHEAD, 1, nil)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)

        let alpn: [UInt8] = [2, UInt8(ascii: "h"), UInt8(ascii: "2")]
        guard SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count)) == 0 else {
            throw fail("cannot offer ALPN h2: \(OpenSSLError.drain())")
        }

        switch configuration.trustRoots {
        case .systemDefault:
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw fail("cannot load the system trust store: \(OpenSSLError.drain())")
            }
        case .caFile(let path):
            guard access(path, R_OK) == 0 else {
                let reason = String(cString: strerror(errno))
                throw fail("cannot read the CA file '\(path)': \(reason); it should be a PEM file of CA certificates")
            }
            guard SSL_CTX_load_verify_locations(context, path, nil) == 1 else {
                throw fail("the CA file '\(path)' holds no usable PEM certificate (\(OpenSSLError.drain()))")
            }
        }

        if let install = configuration.installClientIdentity {
            do {
                try install(context)
            } catch {
                throw fail("cannot install the client identity: \(error)")
            }
        }
        return context
    }

    deinit { SSL_CTX_free(context) }

    /// A new client `SSL*` on `fd` with SNI and host-name (or IP) verification set.
    func makeSession(fileDescriptor fd: Int32) -> OpaquePointer? {
        guard let ssl = SSL_new(context) else { return nil }
        SSL_set_fd(ssl, fd)
        SSL_set_connect_state(ssl)
        let parameters = SSL_get0_param(ssl)
        if serverNameIsIPAddress {
            X509_VERIFY_PARAM_set1_ip_asc(parameters, serverName)
        } else {
            X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            X509_VERIFY_PARAM_set1_host(parameters, serverName, 0)
            serverName.withCString { name in
                _ = SSL_ctrl(
                    ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                    UnsafeMutableRawPointer(mutating: name))
            }
        }
        return ssl
    }
}

/// OpenSSL's thread-local error queue, read into one line.
enum OpenSSLError {
    /// Returns and clears every queued error, joined by "; " ("no details" when empty).
    static func drain() -> String {
        var parts: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(cString(buffer))
        }
        return parts.isEmpty ? "no details" : parts.joined(separator: "; ")
    }

    static func clear() { ERR_clear_error() }
}

/// A String from a NUL-terminated C buffer.
func cString(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

enum IPAddress {
    static func isLiteral(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
