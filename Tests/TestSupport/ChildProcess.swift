// Command-line tools tests run (openssl for keys and certificates, schema and metrics checkers): the
// exit status and what the tool printed, with the command in the error when it fails.

import Foundation
import Platform

/// Runs `path` with `arguments`, discarding its output; returns the exit status.
@discardableResult
package func runProcess(_ path: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try ChildSpawnFence.starting { () throws in try process.run() }
    process.waitUntilExit()
    return process.terminationStatus
}

/// How a child process ended and what it printed.
package struct ProcessResult: Sendable {
    package var status: Int32
    /// Standard output; with `mergingErrors`, standard error too, interleaved as written.
    package var output: [UInt8]
    /// Standard error; empty with `mergingErrors`.
    package var errors: [UInt8]

    package var outputText: String { String(decoding: output, as: UTF8.self) }
    package var errorText: String { String(decoding: errors, as: UTF8.self) }
}

/// Runs `path` with `arguments` in `directory`, feeding it `input`, and waits for it to exit.
/// Throws only when the tool cannot be started; a non-zero status is in the result.
package func runProcessCapturing(
    _ path: String, _ arguments: [String], in directory: String? = nil,
    input: [UInt8]? = nil, mergingErrors: Bool = false
) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    let output = Pipe()
    let errors = mergingErrors ? output : Pipe()
    process.standardOutput = output
    process.standardError = errors
    let inputPipe = Pipe()
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    try ChildSpawnFence.starting { () throws in try process.run() }
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input))
        try inputPipe.fileHandleForWriting.close()
    }
    // Standard error is drained beside standard output: a tool that fills the pipe nobody reads would
    // block forever.
    let errorBytes = ErrorBytes()
    let drained = DispatchGroup()
    if !mergingErrors {
        DispatchQueue.global().async(group: drained) {
            errorBytes.set(Array(errors.fileHandleForReading.readDataToEndOfFile()))
        }
    }
    let outputBytes = Array(output.fileHandleForReading.readDataToEndOfFile())
    drained.wait()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, output: outputBytes, errors: errorBytes.get())
}

/// Runs `path` like `runProcessCapturing`; returns its standard output. Throws `TestFailure` with the
/// command and its standard error when it exits with a non-zero status.
@discardableResult
package func runProcessOutput(
    _ path: String, _ arguments: [String], in directory: String? = nil,
    input: [UInt8]? = nil
) throws -> [UInt8] {
    let result = try runProcessCapturing(path, arguments, in: directory, input: input)
    guard result.status == 0 else {
        throw TestFailure(
            "\((path as NSString).lastPathComponent) \(arguments.joined(separator: " ")) failed: "
                + result.errorText)
    }
    return result.output
}

/// Standard error, read on another thread.
private final class ErrorBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    func set(_ value: [UInt8]) { lock.withLock { bytes = value } }
    func get() -> [UInt8] { lock.withLock { bytes } }
}
