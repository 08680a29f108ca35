// An HTTP proxy that connections tunnel through with CONNECT: where it is, the Basic-auth credentials
// read from a file (never from a URL), and the proxy that HTTPS_PROXY / NO_PROXY choose for a host, the
// way curl reads them.

import Glibc

/// An HTTP/1.1 proxy reached in clear text, through which a connection opens a CONNECT tunnel before TLS.
///
/// TLS runs end to end through the tunnel: the server's certificate is verified against the server's
/// name, never the proxy's, so the proxy sees only the host and port it connects to.
public struct HTTPProxy: Sendable, Equatable {
    /// Basic-auth credentials for the proxy, and the file they came from (named in errors; the password
    /// never is).
    public struct Credentials: Sendable, Equatable, CustomStringConvertible {
        public var username: String
        public var password: String
        /// Where they came from, e.g. the file's path; said when the proxy refuses them.
        public var source: String

        public init(username: String, password: String, source: String) {
            self.username = username
            self.password = password
            self.source = source
        }

        /// Reads `user:password` (one line; a trailing newline is ignored) from `path`.
        public init(contentsOfFile path: String) throws(HTTP2ClientError) {
            func bad(_ why: String) -> HTTP2ClientError {
                HTTP2ClientError(
                    .invalidConfiguration, "the proxy credentials file '\(path)' \(why)", endpoint: "proxy")
            }
            guard let file = fopen(path, "r") else {
                throw bad("cannot be read: \(String(cString: strerror(errno)))")
            }
            defer { fclose(file) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = fread(&chunk, 1, chunk.count, file)
                if count <= 0 { break }
                bytes.append(contentsOf: chunk[0..<count])
                if bytes.count > 64 * 1024 { throw bad("is larger than 64 KiB; it should hold one line user:password") }
            }
            var text = String(decoding: bytes, as: UTF8.self)
            while let last = text.last, last == "\n" || last == "\r" { text.removeLast() }
            guard let colon = text.firstIndex(of: ":"), !text.contains("\n") else {
                throw bad("must hold one line user:password")
            }
            let username = String(text[..<colon])
            guard !username.isEmpty else { throw bad("has an empty user name before ':'; expected user:password") }
            self.init(username: username, password: String(text[text.index(after: colon)...]), source: path)
        }

        /// `Basic base64(user:password)`, the Proxy-Authorization value.
        var basicAuthorization: String { "Basic " + Base64.encode(Array("\(username):\(password)".utf8)) }

        /// Leaves the password out.
        public var description: String { "user '\(username)' from \(source)" }
    }

    public var host: String
    public var port: Int
    public var credentials: Credentials?

    public init(host: String, port: Int, credentials: Credentials? = nil) {
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// A proxy given as `http://host:port` (a trailing `/` is fine). Credentials in the URL are refused:
    /// they would end up in process listings, logs and config dumps; they come from a file instead.
    ///
    /// - Parameter source: what the URL is, for the message (`apns.proxy`, `--proxy`, `HTTPS_PROXY`).
    public init(url: String, credentials: Credentials? = nil, source: String = "the proxy URL")
        throws(HTTP2ClientError)
    {
        func bad(_ why: String) -> HTTP2ClientError {
            HTTP2ClientError(
                .invalidConfiguration,
                "\(source): invalid proxy URL: \(why); expected http://host:port, e.g. http://proxy.internal:3128",
                endpoint: "proxy")
        }
        var rest = Substring(url)
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let name = rest[..<colon].lowercased()
            guard name == "http" else {
                throw bad("the scheme is '\(name)'; only http:// proxies (CONNECT over clear text) are supported")
            }
            rest = rest[rest.index(colon, offsetBy: 3)...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("@") {
            // Say nothing of what is before the '@': it is the password.
            throw bad(
                "it carries credentials (user:password@); put user:password in a file and name it with "
                    + "apns.proxy_credentials_file (or --proxy-credentials-file)")
        }
        if rest.contains("/") || rest.contains("?") || rest.contains("#") { throw bad("it must not have a path") }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("an IPv6 address needs a closing ]") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw bad("unexpected text after the IPv6 address")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw bad("the host is empty") }
        guard let portText else { throw bad("the port is missing") }
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw bad("the port must be a number from 1 to 65535")
        }
        self.init(host: String(host), port: port, credentials: credentials)
    }

    /// `host:port` of the proxy (IPv6 in brackets).
    public var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The proxy the environment chooses for an HTTPS connection to `host:port`, as curl reads it:
    /// `https_proxy` (or `HTTPS_PROXY`) unless `no_proxy` (or `NO_PROXY`) exempts the host. Nil when
    /// none applies. Throws when the variable is not an http://host:port URL or carries credentials.
    public static func fromEnvironment(_ environment: [String: String], host: String, port: Int)
        throws(HTTP2ClientError) -> HTTPProxy?
    {
        let (name, value) =
            if let lower = environment["https_proxy"], !lower.isEmpty { ("https_proxy", lower) } else {
                ("HTTPS_PROXY", environment["HTTPS_PROXY"] ?? "")
            }
        guard !value.isEmpty else { return nil }
        let noProxy = environment["no_proxy"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["NO_PROXY"] ?? ""
        if bypasses(host: host, port: port, noProxy: noProxy) { return nil }
        return try HTTPProxy(url: value, source: "the environment variable \(name)")
    }

    /// Whether a NO_PROXY list exempts `host:port`, matching as curl does: entries separated by commas
    /// (spaces around them ignored); `*` exempts every host; an entry matches the host itself and every
    /// host under it (`example.com` and `.example.com` both match `api.example.com`), case-insensitively;
    /// an entry with `:port` matches only that port; IPv6 addresses may be written in brackets.
    public static func bypasses(host: String, port: Int, noProxy: String) -> Bool {
        var target = host.lowercased()
        if target.hasPrefix("["), target.hasSuffix("]") { target = String(target.dropFirst().dropLast()) }
        while target.hasSuffix(".") { target.removeLast() }
        for rawEntry in noProxy.split(separator: ",") {
            var entry = Substring(rawEntry.trimmingSpaces().lowercased())
            if entry.isEmpty { continue }
            if entry == "*" { return true }
            var entryPort: Int?
            if entry.hasPrefix("[") {
                guard let close = entry.firstIndex(of: "]") else { continue }
                let after = entry[entry.index(after: close)...]
                if after.hasPrefix(":") {
                    guard let number = Int(after.dropFirst()) else { continue }
                    entryPort = number
                }
                entry = entry[entry.index(after: entry.startIndex)..<close]
            } else if entry.filter({ $0 == ":" }).count == 1, let colon = entry.lastIndex(of: ":") {
                guard let number = Int(entry[entry.index(after: colon)...]) else { continue }
                entryPort = number
                entry = entry[..<colon]
            }
            if let entryPort, entryPort != port { continue }
            while entry.hasPrefix(".") { entry = entry.dropFirst() }
            while entry.hasSuffix(".") { entry = entry.dropLast() }
            if entry.isEmpty { continue }
            if target == entry || target.hasSuffix("." + entry) { return true }
        }
        return false
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }
}

/// Standard base64 (RFC 4648 §4, padded), for the Basic-auth header.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let first = UInt32(bytes[index])
            let second = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let third = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let triple = first << 16 | second << 8 | third
            output.append(alphabet[Int(triple >> 18 & 63)])
            output.append(alphabet[Int(triple >> 12 & 63)])
            output.append(index + 1 < bytes.count ? alphabet[Int(triple >> 6 & 63)] : UInt8(ascii: "="))
            output.append(index + 2 < bytes.count ? alphabet[Int(triple & 63)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
