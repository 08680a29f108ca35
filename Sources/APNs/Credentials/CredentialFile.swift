// Reads small credential files (keys, certificates, passwords) with errors that say which file and why.

import Glibc

/// Reading credential files and password files.
public enum CredentialFile {
    /// Credential files are a few kilobytes; anything larger is the wrong file.
    public static let maximumSize = 1 << 20
    /// The password of an encrypted `.p8` key when no password file is named.
    public static let keyPasswordVariable = "APNS_KEY_PASSWORD"
    /// The password of a `.p12` archive (or of an encrypted PEM key beside a certificate) when no
    /// password file is named.
    public static let certificatePasswordVariable = "APNS_CERT_PASSWORD"

    /// Reads a whole credential file.
    /// - Parameter what: what the file should be, for the error message ("APNs signing key (.p8)").
    public static func read(_ path: String, what: String) throws(CredentialError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = errno
            if reason == ENOENT || reason == ENOTDIR {
                throw CredentialError(
                    .fileNotFound,
                    "\(what) file not found at '\(path)'; check the path (relative paths start "
                        + "from the current directory)", path: path)
            }
            throw CredentialError(
                .fileUnreadable, "cannot open the \(what) file '\(path)': \(String(cString: strerror(reason)))",
                path: path)
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw CredentialError(
                .fileUnreadable, "'\(path)' is not a regular file; expected the \(what) file",
                path: path)
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = Glibc.read(descriptor, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw CredentialError(
                    .fileUnreadable, "cannot read '\(path)': \(String(cString: strerror(errno)))", path: path)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk.prefix(count))
            guard bytes.count <= maximumSize else {
                throw CredentialError(
                    .fileUnreadable,
                    "'\(path)' is larger than \(maximumSize / 1024) KiB, too large for a \(what) "
                        + "file; check that this is the right file", path: path)
            }
        }
        // Overwrite the scratch buffer: it held secret bytes.
        for index in chunk.indices { chunk[index] = 0 }
        return bytes
    }

    /// Reads a password file: its first line, without the trailing newline (`\n` or `\r\n`).
    public static func readPassword(_ path: String) throws(CredentialError) -> String {
        let bytes = try read(path, what: "password")
        let firstLine = bytes.prefix { $0 != UInt8(ascii: "\n") }
        let trimmed = firstLine.last == UInt8(ascii: "\r") ? firstLine.dropLast() : firstLine
        return String(decoding: trimmed, as: UTF8.self)
    }
}
