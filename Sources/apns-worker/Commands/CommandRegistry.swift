/// Every subcommand of apns-worker. A command's name may have several words; the longest match wins.
enum CommandRegistry {
    static let all: [any Command.Type] = [
        SendCommand.self,
        BenchSendCommand.self,
        SimulatorCommand.self,
        TokenCommand.self,
        CredentialsInspectCommand.self,
    ]
}
