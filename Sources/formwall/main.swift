import Foundation

// formwall: the command-line entry point. Each subcommand is a `Command` type with its own help.

let commands: [any Command.Type] = [
    ServeCommand.self, ReloadCommand.self, DemoCommand.self, InspectCommand.self, CheckCommand.self, TailCommand.self,
    QuarantineCommand.self,
]

let topHelp = """
formwall: a streaming multipart/form-data filtering reverse proxy.

Usage: formwall <command> [options]

Commands:
\(commands.map { "  " + $0.name.padding(toLength: 12, withPad: " ", startingAt: 0) + $0.summary }.joined(separator: "\n"))

Options:
  --help      show this help (also -h, help)
  --version   print the version

Run `formwall <command> --help` for a command's options.
"""

let argv = Array(CommandLine.arguments.dropFirst())
guard let first = argv.first, first != "--help", first != "-h", first != "help" else {
    print(topHelp)
    exit(argv.isEmpty ? 2 : 0)
}
if first == "--version" {
    print("formwall 0.1.0")
    exit(0)
}
guard let command = commands.first(where: { $0.name == first }) else {
    printError("unknown command '\(first)'. Run `formwall --help`.")
    exit(2)
}
let rest = Array(argv.dropFirst())
if rest.contains("--help") || rest.contains("-h") {
    print(command.help)
    exit(0)
}
exit(command.run(rest))
