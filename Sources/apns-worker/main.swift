// apns-worker's entry point: finds the subcommand and runs it.

import Foundation
import Worker

func printTopLevelHelp() {
    var lines = ["usage: apns-worker <command> [options]", "", "commands:"]
    for command in CommandRegistry.all.sorted(by: { $0.name < $1.name }) {
        let pad = max(1, 26 - command.name.count)
        lines.append("  " + command.name + String(repeating: " ", count: pad) + command.summary)
    }
    lines += [
        "", "Run 'apns-worker <command> --help' for a command's options.",
        "'apns-worker --version' prints the version.",
    ]
    print(lines.joined(separator: "\n"))
}

func standardError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

func main() async -> Int32 {
    MemoryAllocator.purgeFreedMemoryInTheBackground()
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.isEmpty || arguments == ["--help"] || arguments == ["help"] {
        printTopLevelHelp()
        return arguments.isEmpty ? 2 : 0
    }
    if arguments == ["--version"] || arguments == ["version"] {
        print("apns-worker " + WorkerVersion.current)
        return 0
    }
    var match: (command: any Command.Type, words: Int)?
    for command in CommandRegistry.all {
        let words = command.name.split(separator: " ").map(String.init)
        if arguments.count >= words.count, Array(arguments.prefix(words.count)) == words,
            words.count > (match?.words ?? 0)
        {
            match = (command, words.count)
        }
    }
    guard let (command, wordCount) = match else {
        let groups = CommandRegistry.all.filter { $0.name.hasPrefix(arguments[0] + " ") }
        if !groups.isEmpty {
            let choices = groups.map { $0.name.split(separator: " ").dropFirst().joined(separator: " ") }
            standardError("apns-worker \(arguments[0]): choose one of: " + choices.joined(separator: ", "))
        } else {
            standardError("apns-worker: unknown command '\(arguments[0])'. Run 'apns-worker --help' for the list.")
        }
        return 2
    }
    let rest = Array(arguments.dropFirst(wordCount))
    if rest.contains("--help") || rest.contains("-h") {
        print(command.helpText)
        return 0
    }
    do {
        let parsed = try ParsedArguments(rest, specs: command.options)
        return try await command.run(parsed)
    } catch let error as UsageError {
        standardError(
            "apns-worker \(command.name): \(error.message)\nRun 'apns-worker \(command.name) --help' for usage.")
        return 2
    } catch let exit as ExitCode {
        return exit.code
    } catch {
        standardError("apns-worker \(command.name): \(error)")
        return 1
    }
}

exit(await main())
