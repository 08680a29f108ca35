/// Every subcommand of apns-worker. A command's name may have several words; the longest match wins.
enum CommandRegistry {
    static let all: [any Command.Type] = [
        RunCommand.self,
        DevCommand.self,
        BenchPipelineCommand.self,
        SendCommand.self,
        ChannelsCreateCommand.self,
        ChannelsGetCommand.self,
        ChannelsDeleteCommand.self,
        ChannelsListCommand.self,
        BenchSendCommand.self,
        TokenCommand.self,
        CredentialsInspectCommand.self, CredentialsGenerateKeyCommand.self,
        KafkaMockCommand.self,
        RulesCheckCommand.self,
        RulesRenderCommand.self,
        RulesExplainCommand.self,
        BenchRulesCommand.self,
        SimulatorCommand.self,
    ]
}
