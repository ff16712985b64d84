import Foundation

// `datastack`: inspect, dump, history and migrate a Core Data store from the
// command line. DataStackTool.swift runs a command; this file only hands it
// the arguments and exits with its status (ExitStatus.swift lists them).
exit(DataStackTool.run(Array(CommandLine.arguments.dropFirst())).rawValue)
