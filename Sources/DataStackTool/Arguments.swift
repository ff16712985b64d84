/// A command's arguments split by a small hand parser: positional arguments,
/// flags (`--json`) and options with a value (`--model PATH` or `--model=PATH`).
///
/// The package has no dependencies, so no argument-parser package: each
/// command declares the flags and options it takes, and anything else is a
/// usage error naming the argument.
struct Arguments {
    /// The arguments that are not options, in order.
    private(set) var positional: [String] = []
    private(set) var flags: Set<String> = []
    private(set) var values: [String: String] = [:]

    /// Splits `arguments` (after the command name).
    ///
    /// `--` ends the options: what follows is positional even if it starts
    /// with `-` (a file named `-x.sqlite`).
    ///
    /// - Throws: ``ToolError`` (usage) for an unknown option, an option given
    ///   twice, or an option without its value.
    init(_ arguments: [String], flags allowedFlags: Set<String>, options allowedOptions: Set<String>) throws {
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard !optionsEnded, argument.hasPrefix("-"), argument != "-" else {
                positional.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            if allowedFlags.contains(name) {
                guard parts.count == 1 else { throw ToolError.usage("\(name) takes no value") }
                flags.insert(name)
            } else if allowedOptions.contains(name) {
                let value: String
                if parts.count == 2 {
                    value = parts[1]
                } else if index < arguments.count {
                    value = arguments[index]
                    index += 1
                } else {
                    throw ToolError.usage("\(name) needs a value")
                }
                guard values.updateValue(value, forKey: name) == nil else { throw ToolError.usage("\(name) is given twice") }
            } else {
                throw ToolError.usage("unknown option \(name)")
            }
        }
    }

    /// The one positional argument, the store file.
    ///
    /// - Throws: ``ToolError`` (usage) when there is none, or more than one.
    func file() throws -> String {
        guard let file = positional.first else { throw ToolError.usage("missing FILE, the store to read") }
        guard positional.count == 1 else {
            throw ToolError.usage("unexpected argument \(positional[1]): give one FILE")
        }
        return file
    }
}
