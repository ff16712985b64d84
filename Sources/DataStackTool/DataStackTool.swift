import Foundation
import DataStack

/// A command of the tool, parsed from its arguments and ready to run.
protocol ToolCommand {
    /// The store file the command works on; every error message names it.
    var file: URL { get }
    /// Does the work, writing to standard output (and progress to standard error).
    func run() throws
}

/// Runs one invocation of `datastack`: picks the command, runs it, and turns
/// what it throws into a message on standard error and an exit status.
enum DataStackTool {
    static func run(_ arguments: [String]) -> ExitStatus {
        guard let name = arguments.first else {
            return reportUsage(ToolError.usage("missing COMMAND"))
        }
        let rest = Array(arguments.dropFirst())
        if ["help", "--help", "-h"].contains(name) || rest.contains("--help") || rest.contains("-h") {
            Output.standard.write(Usage.text)
            return .ok
        }
        let command: any ToolCommand
        do {
            switch name {
            case "inspect": command = try InspectCommand(rest)
            case "dump": command = try DumpCommand(rest)
            case "history": command = try HistoryCommand(rest)
            case "migrate": command = try MigrateCommand(rest)
            case "reindex": command = try ReindexCommand(rest)
            case "sync-status": command = try SyncStatusCommand(rest)
            default: throw ToolError.usage("unknown command '\(name)'")
            }
        } catch {
            return reportUsage(error)
        }
        do {
            try command.run()
            Output.standard.flush()
            return .ok
        } catch {
            Output.standard.flush()
            return report(error, file: command.file)
        }
    }

    /// Reports an error about `file` on standard error, naming the file.
    static func report(_ error: any Error, file: URL) -> ExitStatus {
        let status = ExitStatus.of(error)
        var message = "\(error)"
        if !message.contains(file.path) { message = "\(file.path): " + message }
        Output.error.write("datastack: " + message)
        if status == .usage { Output.error.write("run 'datastack help' for usage") }
        return status
    }

    /// Reports a usage error before any file was known, with the usage text.
    private static func reportUsage(_ error: any Error) -> ExitStatus {
        Output.error.write("datastack: \(error)\n")
        Output.error.write(Usage.text)
        return ExitStatus.of(error)
    }
}
