import Testing
@testable import Rules
