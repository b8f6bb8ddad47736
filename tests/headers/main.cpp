// The header check's program: the check is that every header's translation unit compiled (with
// -Werror) and that they link together; running it only reports that they did.
int main()
{
    return 0;
}
