import DataStack
import Foundation

/// The ticker-import command: a live demonstration of the dual-coordinator
/// stack (see the README). The `ticker-import` executable runs it; so does
/// `ticker-import-postgresql` (Stores/PostgreSQL), which registers the
/// PostgreSQL store first, so that `--store postgresql://…` opens it.
public enum TickerImportCommand {
    /// Parses the process's arguments, runs until stopped, and exits with
    /// ticker-import's status (0 stopped, 1 failed, 2 bad option, 130 a second Ctrl-C).
    public static func main() -> Never {
        let options: Options
        do {
            options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
        } catch {
            let description = (error as? Options.UsageError)?.description ?? String(describing: error)
            let message = description.isEmpty ? Options.usage : "ticker-import: \(description)\n\n\(Options.usage)"
            FileHandle.standardError.write(Data((message + "\n").utf8))
            exit(description.isEmpty ? ExitStatus.stopped : ExitStatus.usage)
        }

        let app = TickerApp(options: options)

        // Ctrl-C stops after the save in progress; a second Ctrl-C quits at once.
        signal(SIGINT, SIG_IGN)
        let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
        let state = InterruptState()
        interrupt.setEventHandler {
            if state.interrupted { exit(ExitStatus.interrupted) }
            state.interrupted = true
            app.stop()
        }
        interrupt.resume()

        Task.detached {
            do {
                try await app.start()
            } catch {
                app.fail(error)
            }
        }

        // The main context runs on the main queue; Linux needs it serviced explicitly,
        // by dispatch or by Foundation's run loop (both work; --run-loop shows the second).
        if options.runLoop {
            RunLoop.main.run()
            exit(ExitStatus.stopped)
        } else {
            dispatchMain()
        }
    }

    /// Whether Ctrl-C was pressed once.
    // @unchecked Sendable: read and written by the SIGINT handler only, on the main queue.
    private final class InterruptState: @unchecked Sendable {
        var interrupted = false
    }
}
