import Foundation

print("formwall")
