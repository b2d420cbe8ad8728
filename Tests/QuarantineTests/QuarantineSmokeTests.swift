import Testing
@testable import Quarantine
